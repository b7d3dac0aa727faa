"""Is a lease's holder still running? Step Functions' DescribeExecution (core/ports.py ExecutionStatus).

A lease expires ``until`` after its run's worst case, but a run can still overrun it (throttled
Lambdas, slow Map children, retries). BeginRouteRun asks this only for an *expired* lease held by
another run, so it costs one call per overrun, not one per route and tick. DescribeExecution is
eventually consistent too ("results are best effort and may not reflect very recent updates"),
but the execution asked about started at least its whole worst case ago: a stale answer can only
be RUNNING for a run that has just ended, which skips the route one tick more (the safe side).
An unknown execution answers ``ExecutionDoesNotExist`` (DescribeExecution API reference,
https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html); the
IAM action ``states:DescribeExecution`` takes the *execution* resource
``arn:${Partition}:states:${Region}:${Account}:execution:${StateMachineName}:${ExecutionId}``
(Service Authorization Reference, AWS Step Functions,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsstepfunctions.html).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

log = logging.getLogger("replmon")

RUNNING = "RUNNING"


class StepFunctionsExecutions:
    """:class:`~replmon.core.ports.ExecutionStatus` through a ``stepfunctions`` client, made on
    first use (every function builds its Deps; only an overrun needs the client)."""

    def __init__(self, client: Any | Callable[[], Any]) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if callable(self._client) and not hasattr(self._client, "describe_execution"):
            self._client = self._client()
        return self._client

    def running(self, holder: str) -> bool | None:
        if not holder.startswith("arn:") or ":execution:" not in holder:
            return None  # a lab or ad-hoc run id: nothing to ask
        try:
            return bool(self.client.describe_execution(executionArn=holder)["status"] == RUNNING)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                return False
            log.warning("could not tell whether a lease's holder still runs", extra={"holder": holder, "error": str(exc)})
            return None
        except BotoCoreError as exc:
            log.warning("could not tell whether a lease's holder still runs", extra={"holder": holder, "error": str(exc)})
            return None
