"""A Cleanup that returns with failures keeps them where an operator reads them: the structured
log line of the Cleanup function (its JSON names the probe, the route, the run and each side's
error) and the CleanupFailed metric; its result, one entry of the Map's array, carries only the
count (tests/test_payload_bounds.py keeps that array under the state quota).

AWS contract: a Lambda function's stdout goes to its CloudWatch Logs log stream ("Using CloudWatch
Logs with Lambda", https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs.html),
where Powertools Logger writes one JSON object per line.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from replmon.local.aslrun import LambdaContext, load_handler
from replmon.wiring import injected
from tests.conftest import Env, route


def test_a_cleanup_that_fails_logs_each_failure_with_the_probe_and_returns_a_count(env: Env, capsys: pytest.CaptureFixture[str],
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "replmon")

    class Refusing:  # every side refuses the deletes (a broken destination role, an outage)
        def delete_all_versions(self, bucket: str, key: str) -> int:
            raise PermissionError(f"AccessDenied: s3:DeleteObjectVersion on {bucket}/{key} " + "x" * 1000)

        def abort_uploads(self, bucket: str, key: str) -> int:
            raise AssertionError("not reached")

    deps = dataclasses.replace(env.deps, stores=lambda endpoint: Refusing())
    state = {"probe_id": "20261123T100000Z-r-primary-1KiB-t1", "run_id": "20261123T100000Z-r", "planned_at": 0.0, "route": route(),
             "size_bytes": 1024, "size_class": "1KiB", "trial": 1, "timeout_seconds": 60.0, "target_seconds": 900.0,
             "recorded": "stored"}
    import io
    import logging

    from replmon.entry.runtime import logger as powertools

    # the function's own log handler (Powertools' JSON formatter), its stream read here; at the
    # level Lambda runs it with (the local CLI quiets it to ERROR)
    handler = next(h for h in logging.getLogger(powertools.name).handlers if isinstance(h, logging.StreamHandler))
    logs = io.StringIO()
    saved, level = handler.setStream(logs), powertools.log_level
    powertools.setLevel(logging.INFO)
    capsys.readouterr()
    try:
        with injected(deps):
            result = load_handler("Cleanup")(state, LambdaContext("Cleanup"))
    finally:
        handler.setStream(saved)
        powertools.setLevel(level)
    out = capsys.readouterr()
    lines = [json.loads(x) for x in (logs.getvalue() + out.out).splitlines() if x.startswith("{")]
    logged: list[dict[str, Any]] = [x for x in lines if x.get("message") == "cleanup incomplete"]
    assert result["cleanup_failed"] == 2 and "failures" not in result, result  # the count only: source and destination
    assert len(logged) == 1, lines
    entry = logged[0]
    assert entry["probe_id"] == state["probe_id"] and entry["route"] == "primary" and entry["run_id"] == state["run_id"]
    assert [f.split(":")[0] for f in entry["failures"]] == ["source", "destination"]
    assert all(len(f) < 400 for f in entry["failures"])  # each side's error, cut
    assert ("CleanupFailed", 2, {"Route": "primary"}) in env.counted  # the ticket (CleanupFailedG00Alarm)
