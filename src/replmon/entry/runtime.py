"""What every Lambda handler shares: logging with the probe id, tracing, error names, and its
dependencies from the composition root (:func:`replmon.wiring.for_function`).

Each entry module (``replmon/entry/*.py``, re-exported by ``functions/*.py``) is one line:
``handler = lambda_handler(upload_step)``. Import cost is a cold start: a handler builds only
what it uses.

Tracing: every function has Lambda's Active tracing (template.yaml), which records each
invocation's segment without any SDK. The X-Ray SDK adds a subsegment per AWS call, and costs
~130 ms of every cold start to import (docs/BENCH.md, P5), so it is opt-in: with
REPLMON_TRACE_AWS_CALLS=true (ExpertSettings trace_aws_calls) handlers that call AWS build a
Powertools Tracer that patches botocore only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from replmon import wiring
from replmon.core.telemetry import SERVICE


#: In Lambda, Powertools' default stream (stdout; Lambda sends stdout and stderr to CloudWatch Logs);
#: anywhere else (the CLI, the lab, a local run) stderr: stdout holds a command's output alone.
class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (a stream bound at import would outlive a
    redirected or captured stderr and write to a closed file)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


logger = Logger(service=SERVICE, stream=None if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else _Stderr())  # type: ignore[arg-type]


def quiet_handler_logs() -> None:
    """Local runs (`replmon probe`, the lab): the handlers' JSON logs only at ERROR, unless
    POWERTOOLS_LOG_LEVEL asks for them, and on stderr: stdout holds the command's output alone
    (with --format json, one JSON document and nothing else)."""
    import logging

    if not os.environ.get("POWERTOOLS_LOG_LEVEL"):
        logger.setLevel(logging.ERROR)
    for handler in logging.getLogger(logger.name).handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler.stream, _Stderr):
            # not setStream: it flushes the old stream, which may be a capture already closed
            with handler.lock or contextlib.nullcontext():
                handler.stream = _Stderr()

THROTTLE_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
     "ProvisionedThroughputExceededException", "RequestThrottled", "503"}
)


class ThrottledError(Exception):
    """Raised for throttling answers so the state machine retries them with backoff."""


@cache
def tracer() -> Any:
    """One Tracer per execution environment, made on first use (the X-Ray SDK's import is costly)."""
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE, patch_modules=("botocore",))


#: Lambda reports an unhandled error's message as the Cause Step Functions hands on; one long
#: message per probe would fill the execution's 256 KiB state: cut it here.
MAX_ERROR_CHARS = 1024


def short_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, saying how much was cut.

    >>> short_text("x" * 2000, 40)
    'xxxxxxxxxx... [1990 chars cut]'
    """
    if len(text) <= limit:
        return text
    keep = limit - 30
    return f"{text[:keep]}... [{len(text) - keep} chars cut]"


def shortened(exc: Exception) -> Exception:
    """``exc`` itself when its message is short; else an exception of the same name (what Lambda
    reports as ``errorType``, and Retry/Catch match on) with the message cut."""
    message = str(exc)
    if len(message) <= MAX_ERROR_CHARS:
        return exc
    same_name = type(type(exc).__name__, (Exception,), {"__module__": type(exc).__module__})
    return same_name(short_text(message))  # type: ignore[no-any-return]


#: A step: the event and the function's dependencies in, the next state out.
Step = Callable[[dict[str, Any], wiring.Deps], Any]


def trace_aws_calls() -> bool:
    from replmon.core.expert import overlay

    return overlay(os.environ).get("REPLMON_TRACE_AWS_CALLS", "false").lower() == "true"  # ExpertSettings trace_aws_calls


def lambda_handler(step: Step, *, traced: bool = True) -> Callable[[dict[str, Any], Any], Any]:
    """Wrap ``step`` as a Lambda handler; ``traced=False`` for steps that make no AWS call."""

    def run(event: dict[str, Any], context: Any) -> Any:
        if isinstance(event, dict) and "probe_id" in event:
            logger.append_keys(probe_id=event["probe_id"], route=event.get("route", {}).get("name"))
        try:
            result = step(event, wiring.for_function(getattr(context, "function_name", "")))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in THROTTLE_CODES:
                raise ThrottledError(short_text(str(exc))) from exc
            short = shortened(exc)
            if short is exc:
                raise
            raise short from exc
        except Exception as exc:
            short = shortened(exc)
            if short is exc:
                raise
            raise short from exc
        if isinstance(result, dict):  # one structured line per step: status, HEADs, interval so far
            logger.info(step.__name__, extra={k: result[k] for k in ("poll", "upload", "recorded", "cleaned", "status") if k in result})
        return result

    handler = run
    if traced and trace_aws_calls():
        handler = tracer().capture_lambda_handler(capture_response=False)(handler)
    handler = logger.inject_lambda_context(clear_state=True)(handler)
    handler.__name__ = step.__name__
    return handler


def sqs_batch_handler(handle_message: Callable[[Any, str], list[str]]) -> Callable[[dict[str, Any], Any], Any]:
    """An SQS-triggered handler with partial batch failures: Powertools' BatchProcessor runs
    ``handle_message(record, function_name)`` per message and reports the ones that raised
    (``ReportBatchItemFailures``), so one bad message never fails the batch."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def record_handler(record: Any, lambda_context: Any = None) -> list[str]:
        """Powertools passes ``lambda_context`` to a handler that names it."""
        return handle_message(record, getattr(lambda_context, "function_name", ""))

    def run(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return dict(process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context))

    handler: Callable[[dict[str, Any], Any], Any] = run
    if trace_aws_calls():
        handler = tracer().capture_lambda_handler(capture_response=False)(handler)
    return logger.inject_lambda_context(clear_state=True)(handler)
