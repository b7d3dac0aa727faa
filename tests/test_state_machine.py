"""The real statemachines/replication_probe.asl.json under moto's interpreter, real handlers in-process."""

from __future__ import annotations

from typing import Any

from replmon.core.record import ProbeStatus
from replmon.local.aslrun import LocalStateMachine, state_machine_handlers
from replmon.wiring import injected
from tests.conftest import DST, SRC, Env, all_versions, route
from tests.fakes import Scenario

MiB = 2**20


def run(env: Env, payload: dict[str, Any]) -> Any:
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        result = sm.run(payload, timeout=120)
    if result.status == "SUCCEEDED" and "results" in result.output:
        # moto's distributed Map reports a failed child as a None result (AWS fails the Map), and the
        # parent keeps only their count: check that every planned probe reached its Cleanup.
        cleanups = [i for i in result.invocations if i.function == "Cleanup"]
        assert result.output["results"] == {"probes": len(cleanups)}, result.output
        assert all(i.error is None and i.result["recorded"] is not None for i in cleanups), cleanups
    return result


def records(env: Env) -> list[Any]:
    return env.store.query("primary", 0, 4_000_000_000)


def test_pending_then_completed_after_several_polls(env: Env) -> None:
    env.fake.default = Scenario(latency=42.0)
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.COMPLETED
    # The interval brackets the true latency and is no wider than the policy's bound (1 s here).
    assert rec.interval is not None and rec.interval.contains(42.0) and rec.latency_lo < 42.0
    assert rec.width <= 1.0 + 0.01
    assert rec.bound_met, (rec.width, rec.bound_seconds)
    # First HEAD at once, then one per 0.95 s (1 s less the 5 % margin): about 45 HEADs, all counted.
    assert 44 <= rec.head_count <= 47
    assert rec.head_count == env.fake.heads[next(iter(env.fake.heads))]
    polls = [i for i in result.invocations if i.function == "PollReplication"]
    assert 3 <= len(polls) < rec.head_count  # inline polling: several HEADs per invocation, several invocations
    assert all_versions(env.s3, SRC) == [] and all_versions(env.s3, DST) == []
    assert [p.status for p in env.published] == [ProbeStatus.COMPLETED]


def test_failed_replication_is_recorded_as_failed(env: Env) -> None:
    env.fake.default = Scenario(latency=3.0, outcome="FAILED")
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.FAILED
    assert rec.latency_hi is None and rec.latency_lo < 3.0
    assert "FAILED" in rec.failure_reason
    assert [p.status for p in env.published] == [ProbeStatus.FAILED]
    assert all_versions(env.s3, SRC) == []


def test_probe_past_its_timeout_is_recorded_stuck(env: Env) -> None:
    env.fake.default = Scenario(latency=None)  # never replicates
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "timeout_seconds": 120, "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.STUCK
    # The timeout bounds the whole probe from the start of its upload (a few ms here).
    assert 119.9 <= rec.latency_lo < 121 and rec.latency_hi is None
    # 1 s gaps to 50 s, then 2 % of elapsed: far fewer than 240 HEADs of a 0.5 s loop.
    assert 50 < rec.head_count < 110
    assert all_versions(env.s3, SRC) == []


def test_multi_size_map_records_each_probe_and_leaves_nothing(env: Env) -> None:
    env.fake.by_size = {1 * MiB: Scenario(2.0), 20 * MiB: Scenario(30.0), 40 * MiB: Scenario(300.0)}
    result = run(
        env,
        {"routes": [route()], "sizes": ["1MiB", "20MiB", "40MiB"], "trials": 2, "max_concurrency": 1, "poll": {"use_history": False}},
    )
    assert result.status == "SUCCEEDED", result.cause
    assert result.output["results"] == {"probes": 6}
    recs = records(env)
    assert sorted((r.size_class, r.trial) for r in recs) == sorted(
        (c, t) for c in ("1MiB", "20MiB", "40MiB") for t in (1, 2)
    )
    truth = {1 * MiB: 2.0, 20 * MiB: 30.0, 40 * MiB: 300.0}
    for r in recs:
        assert r.status is ProbeStatus.COMPLETED
        assert r.latency_lo < truth[r.size_bytes] <= r.latency_hi, r
        assert r.bound_met, (r.size_class, r.width, r.bound_seconds)
    # 300 s with the 2 % policy: interval within 6 s; ~53 HEADs to 50 s, then one per 1.9 % of
    # elapsed time (2 % less the 5 % margin) ~ 95 more, against 600 for a fixed 0.5 s loop.
    big = [r for r in recs if r.size_bytes == 40 * MiB]
    assert all(r.width <= 6.0 and 143 <= r.head_count <= 155 for r in big), [(r.width, r.head_count) for r in big]
    assert {r.upload_method for r in recs} == {"put", "multipart"}
    assert all_versions(env.s3, SRC) == [] and all_versions(env.s3, DST) == []


def test_history_lets_large_probes_skip_early_heads(env: Env) -> None:
    env.fake.by_size = {20 * MiB: Scenario(20.0), 40 * MiB: Scenario(40.0)}
    payload = {"routes": [route()], "sizes": ["20MiB"], "trials": 3, "max_concurrency": 1}
    assert run(env, payload).status == "SUCCEEDED"
    before = len(records(env))
    result = run(env, {**payload, "sizes": ["40MiB"], "trials": 1})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = [r for r in records(env) if r.size_bytes == 40 * MiB]
    assert before == 3
    # Route throughput ~1 MiB/s -> completion not before ~20 s: the first 20 one-second HEADs are skipped.
    assert rec.head_count < 25 and rec.latency_lo < 40.0 <= rec.latency_hi and rec.bound_met


def test_upload_error_is_recorded_not_lost(env: Env) -> None:
    bad = route(source={"bucket": "no-such-bucket"})
    result = run(env, {"routes": [bad], "sizes": ["1MiB"]})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.ERROR
    assert "NoSuchBucket" in rec.failure_reason


def test_missing_replication_rule_fails_the_probe_with_the_reason(env: Env) -> None:
    env.fake.no_rule = True
    result = run(env, {"routes": [route()], "sizes": ["1MiB"]})
    assert result.status == "SUCCEEDED"
    [rec] = records(env)
    assert rec.status is ProbeStatus.FAILED and rec.head_count == 1
    assert "no replication rule covers prefix 'replmon-probes/'" in rec.failure_reason


def test_invalid_input_fails_the_execution_with_the_field_named(env: Env) -> None:
    result = run(env, {"routes": [route()], "sizes": ["10QB"]})
    assert result.status == "FAILED"
    assert result.error == "ConfigError"
    assert "sizes: unknown size unit 'QB'" in result.cause
    assert records(env) == []


def test_replica_that_does_not_match_fails_the_probe(env: Env) -> None:
    env.fake.default = Scenario(latency=2.0)
    env.fake.corrupt_replicas = True
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.FAILED
    assert rec.failure_reason.startswith("ReplicaMismatch: probe-replica status=REPLICA size_match=True content_match=False (checksum:CRC")
    assert all_versions(env.s3, DST) == []


def test_replica_with_another_etag_but_the_same_checksum_is_completed(env: Env) -> None:
    """SSE-KMS ETags are not content hashes and may differ on the replica: the checksum decides."""
    env.fake.default = Scenario(latency=2.0)
    env.fake.kms_etags = True
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.COMPLETED, rec.failure_reason
    [dest] = rec.destinations
    assert dest["content_match"] and dest["verified_by"].startswith("checksum:CRC")


def test_throttled_upload_is_retried_with_backoff_and_recorded_once(env: Env) -> None:
    from botocore.exceptions import ClientError

    env.fake.default = Scenario(latency=2.0)
    store = env.deps.stores(None)  # type: ignore[arg-type]  # the fake hands one store for every endpoint
    real_put, calls = store.put, []

    def slow_down_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}}, "PutObject")
        return real_put(*args, **kwargs)

    store.put = slow_down_once  # type: ignore[method-assign]
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    uploads = [i.error for i in result.invocations if i.function == "UploadProbe"]
    assert uploads == ["ThrottledError", None]  # the state machine's Retry, not the Catch
    [rec] = records(env)
    assert rec.status is ProbeStatus.COMPLETED and len(calls) == 2
