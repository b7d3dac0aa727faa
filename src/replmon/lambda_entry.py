"""What every Lambda handler shares: logging with the probe id, tracing, error names, wiring.

Handlers are one line each (functions/*.py): ``handler = lambda_handler(upload_step)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from botocore.exceptions import ClientError

from replmon.service import Deps

logger = Logger(service="replmon")
tracer = Tracer(service="replmon")

THROTTLE_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
     "ProvisionedThroughputExceededException", "RequestThrottled", "503"}
)


class ThrottledError(Exception):
    """Raised for throttling answers so the state machine retries them with backoff."""


_deps: Deps | None = None


def deps() -> Deps:
    global _deps
    if _deps is None:
        _deps = Deps.from_env()
    return _deps


def set_deps(value: Deps | None) -> None:
    """Tests and the lab plug in their own stores and clock."""
    global _deps
    _deps = value


Step = Callable[[dict[str, Any], Deps], Any]


def lambda_handler(step: Step) -> Callable[[dict[str, Any], Any], Any]:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> Any:
        if isinstance(event, dict) and "probe_id" in event:
            logger.append_keys(probe_id=event["probe_id"], route=event.get("route", {}).get("name"))
        try:
            result = step(event, deps())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in THROTTLE_CODES:
                raise ThrottledError(str(exc)) from exc
            raise
        if isinstance(result, dict):  # one structured line per step: status, HEADs, interval so far
            logger.info(step.__name__, extra={k: result[k] for k in ("poll", "upload", "recorded", "cleaned", "status") if k in result})
        return result

    handler.__name__ = step.__name__
    return handler
