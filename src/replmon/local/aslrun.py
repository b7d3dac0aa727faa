"""Run the real ``statemachines/*.asl.json`` locally: moto's ASL interpreter, handlers in-process.

This is not a second orchestration: moto interprets the very definition that deploys, and its
Lambda tasks call the real handler functions (``replmon.entry``). Only Step Functions and the
Lambda invoke are emulated (:data:`EMULATED`): every other AWS call — S3, DynamoDB, STS, SQS,
CloudWatch — goes wherever the handlers' clients point (AWS itself, MinIO and DynamoDB Local in
the lab, or a test's own moto), whatever the order in which clients were created.

moto internals are patched; :func:`check_patch_points` fails loudly if a moto upgrade moves
them (moto is pinned in pyproject.toml):
- ``LambdaSimpleBackend.invoke`` (runs the handler instead of echoing the payload);
- with a ManualClock only: ``WaitFunction._wait_interval`` and the ``time`` the Retry
  backoff sleeps with (``retrier_decl``) advance the clock instead of sleeping, so a
  30-minute replication or a long backoff plays in milliseconds;
- the S3 client of a Distributed Map's ``ItemReader`` (``item_reader...resource_eval_s3.boto_client_for``,
  a fleet plan in the plan bucket): ``plan_s3`` when given. moto builds it with no endpoint, which
  in a local run (S3 passed through) would reach AWS itself: :func:`local_state_machine` refuses
  it unless the caller hands the plan bucket's client;
- the Lambda client of a Task state (``lambda_eval_utils.boto_client_for``): moto builds a new
  boto3 client for every invocation (~20 ms of botocore setup each); one client per Region,
  service and state credentials (the role a state's ``Credentials`` names) serves a run.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from replmon import wiring
from replmon.core.clock import ManualClock
from replmon.entry import FUNCTIONS as ENTRY_MODULES
from replmon.local.template import DEFINITION
from replmon.wiring import DepsSource

ACCOUNT = "123456789012"
REGION = "us-east-1"
#: The functions the state machine calls, by their ${NameFunctionArn} placeholder.
FUNCTIONS = ("PlanProbes", "BeginRouteRun", "EndRouteRun", "Housekeeping", "UploadProbe", "PollReplication", "RecordResult", "Cleanup")
#: What moto emulates in a local run; everything else passes through to the real endpoint.
EMULATED = ("states", "lambda")
PASSTHROUGH = rf"^https?://(?!({'|'.join(EMULATED)})\.[a-z0-9-]+\.amazonaws\.com)"
#: The ItemReader's client factory (moto 5.2.5).
ITEM_READER_CLIENT = "moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_eval_s3.boto_client_for"
#: The Lambda Task states' client factory (moto 5.2.5).
LAMBDA_CLIENT = "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils.boto_client_for"

Handler = Callable[[dict[str, Any], Any], Any]


def check_patch_points() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

    sig = list(inspect.signature(LambdaSimpleBackend.invoke).parameters)
    if sig[:4] != ["self", "function_name", "qualifier", "body"]:
        raise RuntimeError(f"moto's LambdaSimpleBackend.invoke changed its signature to {sig}; update replmon.local.aslrun")
    if list(inspect.signature(WaitFunction._wait_interval).parameters) != ["self", "env", "wait_seconds"]:
        raise RuntimeError("moto's WaitFunction._wait_interval changed; update replmon.local.aslrun")
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    if "time.sleep(interval_seconds)" not in inspect.getsource(retrier_decl):
        raise RuntimeError("moto's Retry backoff no longer sleeps with time.sleep; update replmon.local.aslrun")
    module, _, name = ITEM_READER_CLIENT.rpartition(".")
    if not callable(getattr(importlib.import_module(module), name, None)):
        raise RuntimeError(f"moto's ItemReader no longer builds its S3 client with {ITEM_READER_CLIENT}; update replmon.local.aslrun")
    module, _, name = LAMBDA_CLIENT.rpartition(".")
    factory = getattr(importlib.import_module(module), name, None)
    if not callable(factory) or list(inspect.signature(factory).parameters) != ["region", "service", "state_credentials"]:
        raise RuntimeError(f"moto's Lambda task client ({LAMBDA_CLIENT}) changed its signature; update replmon.local.aslrun")


def function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"


def load_definition(path: Path = DEFINITION) -> str:
    """The definition with SAM's DefinitionSubstitutions filled the way the lab names functions."""
    text = path.read_text()
    return re.sub(r"\$\{(\w+)FunctionArn\}", lambda m: function_arn(m.group(1)), text)


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return function_arn(self.function_name)


@dataclass
class Invocation:
    function: str
    event: dict[str, Any]
    error: str | None  # the error's type (Lambda's errorType)
    result: Any = None
    message: str | None = None  # the error's message (Lambda's errorMessage)

    @property
    def failure(self) -> str | None:
        """The error as one line, type and message: ``OSError: [Errno 28] No space left on device: '/x'``."""
        return None if self.error is None else f"{self.error}: {self.message}" if self.message else self.error


@dataclass
class ExecutionResult:
    status: str
    output: Any
    error: str | None
    cause: str | None
    invocations: list[Invocation]


class LocalStateMachine:
    """``with LocalStateMachine(handlers) as sm: sm.run({...})`` — needs moto's mock_aws active.

    ``environments`` (function name -> variables) are set around each of that function's
    invocations, the way Lambda gives each function the environment template.yaml sets.
    """

    def __init__(self, handlers: dict[str, Handler], clock: ManualClock | None = None, definition: Path = DEFINITION,
                 environments: Mapping[str, Mapping[str, str]] | None = None, plan_s3: Any = None, name: str | None = None):
        self.handlers = handlers
        self.name = name  # the state machine's name (template.yaml's: <stack>-replication-probe); else a new one
        self.plan_s3 = plan_s3  # the ItemReader's S3 client (None: moto's own, for a test inside mock_aws)
        self.clock = clock
        self.definition = definition
        self.environments = environments or {}
        self.invocations: list[Invocation] = []
        self._stack = ExitStack()
        self._env_lock = threading.Lock()
        self._active = 0  # handlers running right now
        self._active_lock = threading.Condition()

    def _call(self, name: str, event: dict[str, Any]) -> Any:
        handler = self.handlers.get(name)
        if handler is None:
            raise KeyError(f"no in-process handler for Lambda function {name!r}; known: {sorted(self.handlers)}")
        env = self.environments.get(name)
        if not env:
            return handler(event, LambdaContext(name))
        with self._env_lock, mock.patch.dict(os.environ, env, clear=True):
            return handler(event, LambdaContext(name))

    def _invoke(self, backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: dict[str, str]) -> bytes:
        name = function_name.rsplit(":", 1)[-1] if ":function:" in function_name else function_name
        event = json.loads(body or "{}")
        with self._active_lock:
            self._active += 1
        try:
            result = self._call(name, event)
        except Exception as exc:  # what Lambda reports for an unhandled error: its type, and its message (an OSError's errno and path)
            self.invocations.append(Invocation(name, event, type(exc).__name__, message=str(exc)[:500]))
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode()
        finally:
            with self._active_lock:
                self._active -= 1
                self._active_lock.notify_all()
        self.invocations.append(Invocation(name, event, None, result))
        return json.dumps(result).encode()

    def wait_idle(self, timeout: float) -> bool:
        """Until no handler is running (True), or ``timeout`` seconds (False)."""
        with self._active_lock:
            return self._active_lock.wait_for(lambda: self._active == 0, timeout)

    def __enter__(self) -> LocalStateMachine:
        check_patch_points()
        runner = self

        def invoke(backend: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: dict[str, str]) -> bytes:
            return runner._invoke(backend, function_name, qualifier, body, headers, response_headers)

        self._stack.enter_context(mock.patch("moto.awslambda_simple.models.LambdaSimpleBackend.invoke", invoke))
        if self.clock is not None:
            clock = self.clock

            def wait(_self: Any, env: Any, wait_seconds: int) -> None:
                clock.advance(wait_seconds)

            self._stack.enter_context(
                mock.patch(
                    "moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function.WaitFunction._wait_interval",
                    wait,
                )
            )

            class BackoffTime:  # the Retry backoff's view of the time module: sleeping advances the clock
                sleep = staticmethod(clock.advance)
                time = staticmethod(clock.now)

            self._stack.enter_context(mock.patch("moto.stepfunctions.parser.asl.component.common.retry.retrier_decl.time", BackoffTime))
        if self.plan_s3 is not None:
            plan_s3 = self.plan_s3

            def item_reader_client(region: str, service: str, state_credentials: Any = None) -> Any:
                return plan_s3

            self._stack.enter_context(mock.patch(ITEM_READER_CLIENT, item_reader_client))
        build_client = importlib.import_module(LAMBDA_CLIENT.rpartition(".")[0]).boto_client_for
        lambda_clients: dict[tuple[str, str, str | None], Any] = {}

        def lambda_client(region: str, service: str, state_credentials: Any = None) -> Any:
            key = (region, service, getattr(state_credentials, "role_arn", None))
            if key not in lambda_clients:  # two threads may both build one: either serves
                lambda_clients[key] = build_client(region=region, service=service, state_credentials=state_credentials)
            return lambda_clients[key]

        self._stack.enter_context(mock.patch(LAMBDA_CLIENT, lambda_client))
        from replmon.adapters import clients

        # Explicit placeholder keys: the emulated services check none, and the caller's real
        # credentials (for S3, DynamoDB...) are never handed to the emulator.
        self.sfn = clients.client("stepfunctions", clients.CONTROL, region=REGION, keys=("local", "local"))
        self.sfn._replmon_untracked = True  # the service's own calls, not a function's (tests/iam.py)
        self.arn = self.sfn.create_state_machine(
            name=self.name or f"replication-probe-{uuid.uuid4().hex[:8]}",
            definition=load_definition(self.definition),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/replmon-local",
            type="STANDARD",
        )["stateMachineArn"]
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def start(self, payload: dict[str, Any]) -> str:
        # An explicit name: moto names unnamed executions "None", so a second run would collide.
        name = str(payload.get("run_id") or uuid.uuid4().hex)[:80]
        return str(self.sfn.start_execution(stateMachineArn=self.arn, name=name, input=json.dumps(payload))["executionArn"])

    def stop(self, execution_arn: str, error: str, cause: str) -> None:
        self.sfn.stop_execution(executionArn=execution_arn, error=error, cause=cause)

    def wait(
        self, execution_arn: str, timeout: float = 600.0, poll: float = 0.05,
        on_poll: Callable[[list[Invocation]], None] | None = None,
    ) -> ExecutionResult:
        """Until the execution ends; ``on_poll`` sees the invocations so far (for progress bars).
        The first looks come quickly and the gaps grow to ``poll``: most local executions end
        within a second, and a fixed gap waited half of it on average after each one ended."""
        deadline = time.monotonic() + timeout
        gap = min(0.005, poll)
        while True:
            desc = self.sfn.describe_execution(executionArn=execution_arn)
            if on_poll:
                on_poll(list(self.invocations))
            if desc["status"] != "RUNNING":
                break
            if time.monotonic() > deadline:
                self.stop(execution_arn, "LocalTimeout", f"still running after {timeout} s")
                raise TimeoutError(f"state machine execution still running after {timeout} s")
            time.sleep(gap)
            gap = min(gap * 2, poll)
        return ExecutionResult(
            status=desc["status"],
            output=json.loads(desc["output"]) if desc.get("output") else None,
            error=desc.get("error"),
            cause=desc.get("cause"),
            invocations=list(self.invocations),
        )

    def run(self, payload: dict[str, Any], timeout: float = 600.0) -> ExecutionResult:
        self.invocations.clear()
        return self.wait(self.start(payload), timeout)


def load_handler(name: str) -> Handler:
    """The ``handler`` of the function's entry module: the very entry point that deploys."""
    return importlib.import_module(ENTRY_MODULES[name]).handler  # type: ignore[no-any-return]


def state_machine_handlers() -> dict[str, Handler]:
    """The real Lambda handlers of the state machine's functions; each gets its dependencies from
    the composition root (``with wiring.injected(deps)`` around a run replaces them)."""
    return {name: load_handler(name) for name in FUNCTIONS}


def local_config() -> dict[str, Any]:
    """moto configuration for a local run: emulate Step Functions and Lambda, pass the rest through."""
    return {
        "stepfunctions": {"execute_state_machine": True},
        "lambda": {"use_docker": False},
        "core": {"mock_credentials": False, "reset_boto3_session": False, "service_whitelist": None,
                 "passthrough": {"urls": [PASSTHROUGH], "services": []}},
    }


class NoPlanBucket:
    """The ItemReader's client in a local run without a plan bucket: every call refuses (moto's own
    client has no endpoint, and S3 passes through: it would read from AWS itself)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("this local run has no plan bucket: a fleet plan read by ItemReader needs "
                           "local_state_machine(..., plan_s3=<the plan bucket's S3 client>)")


@contextmanager
def local_state_machine(deps: DepsSource, clock: ManualClock | None = None, plan_s3: Any = None) -> Iterator[LocalStateMachine]:
    """The real definition and handlers, with ``deps`` injected; only Step Functions and Lambda are emulated."""
    from moto import mock_aws

    machine = LocalStateMachine(state_machine_handlers(), clock=clock, plan_s3=plan_s3 or NoPlanBucket())
    with mock_aws(config=local_config()), wiring.injected(deps), machine as sm:  # type: ignore[call-overload]
        yield sm
