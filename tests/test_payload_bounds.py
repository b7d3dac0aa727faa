"""The run's state stays bounded - the largest plan PlanProbes allows, every probe's
Cleanup failing with a ~30 KiB Cause, through the real ASL under moto's interpreter (which enforces
the 256 KiB quota as States.DataLimitExceeded); sizes are measured on the real outputs.

AWS contracts encoded here:
- "Maximum input or output size for a task, state, or execution - 262,144 bytes of data as a
  UTF-8 encoded string" ("Step Functions service quotas",
  https://docs.aws.amazon.com/step-functions/latest/dg/limits-overview.html).
- "If you don't export the Map state results, it returns an array of all the child workflow
  execution results" ("Using Map state in Distributed mode",
  https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html; "ResultWriter
  (Map)", https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultwriter.html).
  Whether the quota applies to that array before ResultSelector trims it is not documented, so the
  array itself is kept bounded too (each child ends in a small summary, never a Cause), and
  measured with the ResultSelector taken out. (moto writes only a manifest for ResultWriter, M.1:
  not used.)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from replmon.core.errors import ConfigError
from replmon.core.expert import ExpertSettings
from replmon.entry.runtime import MAX_ERROR_CHARS
from replmon.local.aslrun import LambdaContext, LocalStateMachine, load_handler, state_machine_handlers
from replmon.local.template import DEFINITION
from replmon.probe.plan import check_fits
from replmon.probe.request import load_request
from replmon.wiring import injected
from tests.conftest import Env, route
from tests.fakes import Scenario

QUOTA = 262_144  # bytes
RAW_TRIALS = 6  # probes of the variant without ResultSelector (one child's summary is what it measures)
CAUSE = "cleanup could not reach the destination: " + "x" * (30 * 1024)


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def largest_trials(payload: dict[str, Any]) -> int:
    """The most trials PlanProbes accepts for ``payload`` (its MAX_PLAN_BYTES check)."""
    lo, hi = 1, 1000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            check_fits(load_request({**payload, "trials": mid}))
            lo = mid
        except ConfigError:
            hi = mid - 1
    return lo


def failing_cleanup(event: dict[str, Any], context: Any) -> Any:
    """What a Lambda timeout or crash outside replmon's code looks like: a Cause nobody cut."""
    raise RuntimeError(CAUSE)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both runs in one moto: the real definition, and the same without the Map's ResultSelector."""
    from moto import mock_aws

    from replmon.core.clock import ManualClock

    raw = json.loads(DEFINITION.read_text())
    del raw["States"]["Probes"]["ResultSelector"]
    variant = tmp_path_factory.mktemp("asl") / "no_result_selector.asl.json"
    variant.write_text(json.dumps(raw))
    payload = {"routes": [route()], "sizes": "1MiB", "max_concurrency": 1000, "poll": {"use_history": False}}
    trials = largest_trials(payload)
    out: dict[str, Any] = {"trials": trials}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            mp.setenv(k, v)
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
            env = Env(ManualClock(start=1_790_000_000.0, tick=0.001))
            env.fake.default = Scenario(latency=0.5)
            handlers = {**state_machine_handlers(), "Cleanup": failing_cleanup}
            # The variant measures one child's summary, the same at any plan size: a few probes
            # show it (the test scales it to the largest plan), the real definition runs them all.
            for name, definition, run_id, n in (("real", DEFINITION, "20261123T100000Z-bound", trials),
                                                ("raw", variant, "20261123T110000Z-bound", RAW_TRIALS)):
                with injected(env.deps), LocalStateMachine(handlers, clock=env.clock, definition=definition) as sm:
                    out[name] = sm.run({**payload, "trials": n, "run_id": run_id}, timeout=600)
            out["records"] = len(env.store.query("primary", 0, 4e9))
            # The real Cleanup, every side's delete failing: it returns (with its failures), so its
            # own result is the child's entry in the Map's array.
            env.fake.fail_deletes = 10**6
            with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock, definition=variant) as sm:
                out["raw_failing"] = sm.run({**payload, "trials": RAW_TRIALS, "run_id": "20261123T120000Z-bound"}, timeout=600)
    return out


def test_the_largest_plan_with_every_cleanup_failing_stays_far_under_the_quota(runs: dict[str, Any]) -> None:
    trials, real = runs["trials"], runs["real"]
    assert trials >= 100  # MAX_PLAN_BYTES admits ~100+ probes of one route and size
    assert real.status == "SUCCEEDED", (real.error, real.cause and real.cause[:300])
    cleanups = [i for i in real.invocations if i.function == "Cleanup"]
    assert len(cleanups) == trials and all(i.error == "RuntimeError" for i in cleanups)
    assert runs["records"] == trials + RAW_TRIALS  # each run recorded every probe before its cleanup failed
    assert real.output["results"] == {"probes": trials}
    # The parent's output holds no child result: it stays small whatever the children did.
    assert size(real.output) < 16 * 1024, size(real.output)
    assert CAUSE[:100] not in json.dumps(real.output)


def test_the_map_array_itself_is_bounded_without_the_result_selector(runs: dict[str, Any]) -> None:
    raw = runs["raw"]
    assert raw.status == "SUCCEEDED", (raw.error, raw.cause and raw.cause[:300])
    results = raw.output["results"]
    assert len(results) == RAW_TRIALS
    # Each child ends in CleanupAbandoned's summary: the error's name, never its 30 KiB Cause.
    assert all(r["status"] == "CLEANUP_FAILED" and r["cleanup_error"] == "RuntimeError" for r in results), results[:2]
    per_child = max(size(r) for r in results)
    assert per_child < 256, per_child
    # The array at the largest plan (and at 200 probes, MAX_PROBES_PER_ROUTE_RUN), from the largest
    # summary: still within a quarter of the quota.
    wrapper = size(raw.output) - size(results)
    assert max(200, runs["trials"]) * (per_child + 1) + wrapper < QUOTA // 4, (per_child, wrapper)
    # A fleet tick's Map (ProbesFromPlan reads its items from the plan bucket) holds at most
    # FleetMaxProbes children: their array stays under the quota too, whether or not it is counted
    # before the ResultSelector (undocumented).

    most = ExpertSettings.model_fields["fleet_max_probes"].metadata[-1].le  # ExpertSettings fleet_max_probes' bound
    assert most * (per_child + 1) + wrapper < QUOTA, (most, per_child)


def test_a_handlers_long_error_message_is_cut_before_step_functions_sees_it(env: Env) -> None:
    """The real Cleanup handler failing outside its per-side try (its stores cannot be built):
    the error keeps its name (Retry and Catch match on it), its message is cut to MAX_ERROR_CHARS."""

    def no_store(endpoint: Any) -> Any:
        raise ValueError(CAUSE)

    deps = dataclasses.replace(env.deps, stores=no_store)
    state = {"probe_id": "p", "run_id": "20261123T100000Z-r", "planned_at": 0.0, "route": route(), "size_bytes": 1,
             "size_class": "1B", "trial": 1, "timeout_seconds": 60.0, "target_seconds": 900.0}
    with injected(deps), pytest.raises(Exception) as info:
        load_handler("Cleanup")(state, LambdaContext("Cleanup"))
    assert type(info.value).__name__ == "ValueError"
    assert len(str(info.value)) <= MAX_ERROR_CHARS and str(info.value).endswith("chars cut]")
    assert Path(DEFINITION).exists()


def test_every_cleanup_returning_failures_keeps_each_child_small(runs: dict[str, Any]) -> None:
    """A Cleanup that returns with failures (a broken destination role, a destination outage) puts
    counts in its result, never the failures' text (that goes to the log and CleanupFailed): the
    array of the largest fleet Map stays under the quota."""

    raw = runs["raw_failing"]
    assert raw.status == "SUCCEEDED", (raw.error, raw.cause and raw.cause[:300])
    results = raw.output["results"]
    cleanups = [i.result for i in raw.invocations if i.function == "Cleanup"]
    assert len(results) == RAW_TRIALS and all(c["cleanup_failed"] == 2 and c["cleaned"] == {} for c in cleanups), cleanups[:2]
    assert all(r["cleanup_failed"] == 2 for r in results) and "emulated outage" not in json.dumps(results)
    per_child = max(size(r) for r in results)
    assert per_child < 256, per_child
    wrapper = size(raw.output) - size(results)
    most = ExpertSettings.model_fields["fleet_max_probes"].metadata[-1].le  # ExpertSettings fleet_max_probes' bound
    assert most * (per_child + 1) + wrapper < QUOTA, (most, per_child)
