"""Is a lease's holder still running? Step Functions' DescribeExecution (core/ports.py ExecutionStatus).

A lease expires ``until`` after its run's worst case, but a run can still overrun it (throttled
Lambdas, slow Map children, retries). BeginRouteRun asks this once per other holder of the routes it
plans (a run holds many routes): an ended holder does not block, even before its lease expires.
DescribeExecution is eventually consistent too ("results are best effort and may not reflect very recent updates"),
so an execution it does not know (``ExecutionDoesNotExist``: perhaps one that has just started) is
"cannot tell" (its lease's expiry decides), and a stale RUNNING for a run that has just ended skips
the route one tick more (the safe side) (DescribeExecution API reference,
https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html). The
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
#: Statuses of an execution that runs now (DescribeExecution's status; PENDING_REDRIVE is a Map Run
#: child execution's, one about to run again).
STILL_RUNS = frozenset({RUNNING, "PENDING_REDRIVE"})
#: The one status after which an execution never runs again. A FAILED, TIMED_OUT or ABORTED execution
#: can be redriven for 14 days: same ARN, continuing from its failed step (Map iterations too), and
#: then RUNNING again (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-executions.html,
#: https://docs.aws.amazon.com/goto/WebAPI/states-2016-11-23/RedriveExecution). So such a holder has
#: ended only when DescribeExecution's ``redriveStatus`` says NOT_REDRIVABLE (its
#: ``redriveStatusReason`` says why); otherwise it is "cannot tell" and its lease's expiry decides.
ENDED = "SUCCEEDED"
NOT_REDRIVABLE = "NOT_REDRIVABLE"


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
            described = self.client.describe_execution(executionArn=holder)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ExecutionDoesNotExist":
                # Not "ended": DescribeExecution is eventually consistent, and a run that has just started
                # (and taken its lease) may not be seen yet; its expiry decides (an expired lease is taken).
                return None
            log.warning("could not tell whether a lease's holder still runs", extra={"holder": holder, "error": str(exc)})
            return None
        except BotoCoreError as exc:
            log.warning("could not tell whether a lease's holder still runs", extra={"holder": holder, "error": str(exc)})
            return None
        status = described.get("status")
        if status in STILL_RUNS:
            return True
        if status == ENDED or described.get("redriveStatus") == NOT_REDRIVABLE:
            return False
        return None  # failed, timed out or aborted, and redrivable (or not said): its lease's expiry decides
