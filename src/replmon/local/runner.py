"""Run a probe request through the real state machine locally (moto's ASL interpreter) and
collect its records: what `replmon probe`, the lab and the benchmarks share."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replmon.config import load_request
from replmon.local.aslrun import ExecutionResult, Invocation, local_state_machine
from replmon.plan import new_run_id
from replmon.record import ProbeRecord
from replmon.service import Deps


@dataclass
class RunResult:
    run_id: str
    execution: ExecutionResult
    records: list[ProbeRecord]
    seconds: float

    @property
    def failed_iterations(self) -> int:
        """Probes whose steps failed beyond their retries (moto reports them as None results)."""
        results = (self.execution.output or {}).get("results") or []
        return sum(1 for r in results if not isinstance(r, dict))


def run_request(
    payload: dict[str, Any],
    deps: Deps,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 24 * 3600,
    function_deps: Any = None,
) -> RunResult:
    """Validate ``payload`` (errors name the field), execute it, return this run's records.

    ``function_deps`` (function name -> Deps) gives each handler its own wiring (the lab's
    least-privilege users); ``deps`` otherwise."""
    request = load_request(payload, deps.defaults, poll_function_timeout=deps.poll_function_timeout)  # fail fast
    # moto logs every failed state at length; the execution result carries the same error.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    if not os.environ.get("POWERTOOLS_LOG_LEVEL"):  # the handlers' JSON logs: set the variable to see them
        from replmon.lambda_entry import logger

        logger.setLevel(logging.WARNING)
    total = len(request.sizes) * request.trials * len(request.routes)
    run_id = payload.get("run_id") or new_run_id()
    started = time.time()

    def progress(invocations: list[Invocation]) -> None:
        if on_progress:  # a probe is done when its Cleanup succeeded
            on_progress(sum(1 for i in invocations if i.function == "Cleanup" and i.error is None), total)

    with local_state_machine(function_deps or deps) as sm:
        execution = sm.wait(sm.start({**payload, "run_id": run_id}), timeout=timeout, poll=0.1, on_poll=progress)
    records = [
        r
        for route in request.routes
        for r in deps.latency_store.query(route.name, started - 60, time.time() + 60)
        if r.run_id == run_id
    ]
    return RunResult(run_id, execution, sorted(records, key=lambda r: (r.size_bytes, r.trial)), time.time() - started)


class PreflightError(RuntimeError):
    """An endpoint, bucket, credential or store problem found before any probe is written."""


def _why(exc: Exception) -> str:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(exc, EndpointConnectionError):
        return "cannot connect (is the server running and the URL right?)"
    if isinstance(exc, NoCredentialsError):
        return "no credentials: pass --access-key/--secret-key or set AWS credentials"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "AccessDenied", "InvalidClientTokenId"):
            return f"credentials rejected ({code}): check --access-key/--secret-key"
        if code in ("404", "NoSuchBucket", "ResourceNotFoundException"):
            return f"not found ({code})"
        return code or str(exc)
    return str(exc).splitlines()[0]


def preflight(payload: dict[str, Any], deps: Deps) -> None:
    """Reach every bucket and the store first, so a bad flag writes nothing anywhere."""
    request = load_request(payload, deps.defaults, poll_function_timeout=deps.poll_function_timeout)
    for route in request.routes:
        for role, ep in [("source", route.source), *[("destination", d) for d in route.destinations]]:
            where = f"{role} bucket {ep.bucket!r}" + (f" at {ep.endpoint_url}" if ep.endpoint_url else "")
            try:
                deps.stores(ep).check_bucket(ep.bucket)
            except Exception as exc:
                raise PreflightError(f"{where}: {_why(exc)}") from None
        try:
            deps.latency_store.query(route.name, 0, 1, limit=1)
        except Exception as exc:
            raise PreflightError(f"latency store: {_why(exc)}") from None
