"""Lambda entry point of FioTaskStopped: each STOPPED runner task's ECS event (EventBridge) is
judged (replmon.mounts.taskevents) and a task that never reported counts once in FioRunFailed.

Invoked asynchronously by EventBridge (retries, then its dead-letter queue, alarmed): an error
here (the store or S3 unreachable) raises, so the event is retried rather than lost.

Whether the task wrote its summary is a listing of that one key (``ObjectStore.object_size``):
allowed by s3:ListBucket on the tasks/ prefix alone, and unambiguous (a HEAD of a missing key
answers 403, not 404, unless the caller may list the whole bucket: S3 HeadObject API reference,
"Permissions").
"""

from __future__ import annotations

import os
import time
from typing import Any

from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.core.route import Endpoint
from replmon.entry.runtime import lambda_handler, logger
from replmon.mounts.document import task_key
from replmon.mounts.taskevents import NotAStoppedTask, family, judge, task_of
from replmon.wiring import Deps

MARKER_DAYS = 30


def task_stopped(event: dict[str, Any], d: Deps) -> dict[str, Any]:
    try:
        task_id, _ = task_of(event)
    except NotAStoppedTask as exc:
        logger.info("ignored", extra={"reason": str(exc)})
        return {"counted": 0, "reason": str(exc)}
    bucket = os.environ["REPLMON_FIO_RESULTS_BUCKET"]
    key = task_key(os.environ.get("REPLMON_FIO_RESULTS_PREFIX", "fio-results/"), task_id)
    reported = d.results(Endpoint(bucket=bucket)).object_size(bucket, key) is not None
    verdict = judge(event, reported)
    first = d.store.put_item_once({
        PARTITION_KEY: f"fio-task#{task_id}", SORT_KEY: "stopped", TTL_ATTRIBUTE: int(time.time() + MARKER_DAYS * 86_400),
        "failed": verdict.failed, "reason": verdict.reason, "exit_code": verdict.exit_code})
    if not first:
        logger.info("already judged", extra={"task_id": task_id})
        return {"counted": 0, "reason": "already judged"}
    if verdict.failed:
        d.metrics.count("FioRunFailed", 1, {"Target": f"task:{family(event)}", "Preset": "-"})
    logger.info("fio task stopped", extra={"task_id": task_id, "failed": verdict.failed, "reason": verdict.reason})
    return {"counted": int(verdict.failed), "reason": verdict.reason}


handler = lambda_handler(task_stopped)
