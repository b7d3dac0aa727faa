"""A runner task that stopped without reporting is counted as a failed run.

ECS sends an "ECS Task State Change" event to EventBridge whenever a task's state changes; a
STOPPED task's event carries ``stopCode`` (``TaskFailedToStart``, ``EssentialContainerExited``,
``UserInitiated``, ``ServiceSchedulerInitiated``, ``SpotInterruption``, ``TerminationNotice``,
...), ``stoppedReason`` and each container's ``exitCode`` (ECS developer guide, "Amazon ECS task
state change events"; the API's TaskStopCode). The same change can be sent more than once.

The runner counts its own failures (FioRunFailed, from its EMF) and writes ``tasks/<task id>.json``
at its very end. So a STOPPED task is judged here:

- ``TaskFailedToStart``: it never ran (no capacity, image pull, ENI, ...): failed;
- stopped before the runner's container exited (no exit code): failed;
- no task summary in the results bucket: failed - it exited (OOM-killed: 137) or was killed before
  it could report, whatever its exit code;
- a summary: the runner reported, and counted any failure itself: nothing to add.

Each task is judged once (a conditional put of ``fio-task#<task id>`` in the table), so a
repeated event never counts twice.

>>> ev = {"detail-type": "ECS Task State Change", "detail": {"lastStatus": "STOPPED", "stopCode": "TaskFailedToStart",
...       "stoppedReason": "RESOURCE:MEMORY", "taskArn": "arn:aws:ecs:us-east-1:1:task/c/abc", "containers": []}}
>>> judge(ev, summary_exists=False)
Stopped(task_id='abc', failed=True, reason='never started: TaskFailedToStart: RESOURCE:MEMORY', exit_code=None)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RUNNER_CONTAINER = "fio"
DETAIL_TYPE = "ECS Task State Change"


class NotAStoppedTask(ValueError):
    """An event this function has nothing to do with (another detail type, not STOPPED)."""


@dataclass(frozen=True)
class Stopped:
    task_id: str
    failed: bool
    reason: str
    exit_code: int | None


def task_of(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(task id, detail) of a STOPPED task's event; NotAStoppedTask otherwise."""
    detail = event.get("detail") or {}
    if event.get("detail-type") != DETAIL_TYPE or detail.get("lastStatus") != "STOPPED":
        raise NotAStoppedTask(f"{event.get('detail-type')!r} / lastStatus {detail.get('lastStatus')!r}: not a stopped task")
    arn = detail.get("taskArn")
    if not isinstance(arn, str) or "/" not in arn:
        raise NotAStoppedTask(f"detail.taskArn {arn!r}: not a task ARN")
    return arn.rsplit("/", 1)[-1], detail


def judge(event: dict[str, Any], summary_exists: bool) -> Stopped:
    task_id, d = task_of(event)
    code, why = d.get("stopCode"), d.get("stoppedReason") or "no reason given"
    runner = next((c for c in d.get("containers") or [] if c.get("name") == RUNNER_CONTAINER), None)
    exit_code = runner.get("exitCode") if runner else None
    if code == "TaskFailedToStart":
        return Stopped(task_id, True, f"never started: {code}: {why}", exit_code)
    if exit_code is None:
        return Stopped(task_id, True, f"stopped before the runner exited: {code}: {why}", None)
    if not summary_exists:
        return Stopped(task_id, True, f"the runner exited {exit_code} without writing its task summary "
                                      f"(killed or crashed: 137 is the OOM killer's SIGKILL): {code}: {why}", exit_code)
    return Stopped(task_id, False, f"the runner reported (exit {exit_code}); any failure is already counted", exit_code)


def family(event: dict[str, Any]) -> str:
    """The task definition's family (what names the task in metrics): ...:task-definition/<family>:<revision>."""
    arn = str((event.get("detail") or {}).get("taskDefinitionArn") or "unknown")
    return arn.rsplit("/", 1)[-1].split(":")[0]
