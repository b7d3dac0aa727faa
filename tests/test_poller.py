"""The polling policy, played on a manual clock: exact HEAD counts and interval bounds."""

from __future__ import annotations

import math

import pytest

from replmon.core.clock import ManualClock
from replmon.core.ports import HeadResult
from replmon.core.route import Route
from replmon.probe.poll import poll_replication, start_polling
from replmon.probe.polling import PollPolicy, earliest_completion
from replmon.probe.request import PollSettings
from replmon.probe.state import ProbeState, Upload
from tests.conftest import route


class ScriptedStore:
    """Source HEAD answers PENDING until ``latency`` after the PUT, then ``final``."""

    def __init__(self, clock: ManualClock, put_end: float, latency: float | None, final: str = "COMPLETED", rtt: float = 0.02):
        self.clock, self.put_end, self.latency, self.final, self.rtt = clock, put_end, latency, final, rtt
        self.heads = 0

    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult:
        if bucket == "probe-replica":
            return HeadResult("REPLICA", 100, "etag", version_id)
        self.heads += 1
        self.clock.advance(self.rtt / 2)  # the server answers mid-request
        done = self.latency is not None and self.clock.now() - self.put_end >= self.latency
        self.clock.advance(self.rtt / 2)
        return HeadResult(self.final if done else "PENDING", 100, "etag", version_id)


def play(latency: float | None, settings: PollSettings | None = None, timeout: int = 7200,
         not_before: float = 0.0, final: str = "COMPLETED") -> tuple[ProbeState, ScriptedStore, int]:
    settings = settings or PollSettings(use_history=False)
    clock = ManualClock(start=1000.0)
    store = ScriptedStore(clock, put_end=1000.0, latency=latency, final=final)
    state = ProbeState(
        probe_id="p", run_id="19700101T001638Z-r", planned_at=998.0, route=Route(**route()), size_bytes=100, size_class="100B", trial=1,
        timeout_seconds=timeout, target_seconds=900, poll_settings=settings,
        upload=Upload(key="k", version_id="v", etag="etag", method="put", put_start=999.0, put_end=1000.0),
    )
    state = start_polling(state, not_before)
    invocations = 0
    while True:  # what the state machine does: invoke, Wait wait_seconds, invoke again
        invocations += 1
        state = poll_replication(state, lambda e: store, clock)  # type: ignore[arg-type,return-value]
        assert state.poll is not None
        if state.poll.status != "PENDING":
            return state, store, invocations
        clock.advance(state.poll.wait_seconds)


@pytest.mark.parametrize("latency", [0.3, 5.0, 42.0, 120.0, 1800.0, 5400.0])
def test_interval_contains_truth_within_the_bound(latency: float) -> None:
    state, store, _ = play(latency)
    p = state.poll
    assert p.status == "COMPLETED"
    lo = p.last_pending or 0.0
    assert lo <= latency <= p.first_final
    assert p.first_final - lo <= PollPolicy().bound(p.first_final) + 1e-6
    assert p.head_count == store.heads


def test_head_counts_grow_logarithmically() -> None:
    """~1 s gaps to 50 s, then ~2 % steps: ~245 HEADs for 30 minutes (a 0.5 s loop: 3,602)."""
    counts = {lat: play(lat)[0].poll.head_count for lat in (60.0, 600.0, 1800.0)}
    expected = {lat: 53 + math.log(lat / 50) / math.log(1.019) for lat in counts}
    for lat, n in counts.items():
        assert abs(n - expected[lat]) < 0.1 * expected[lat] + 3, (lat, n, expected[lat])
    assert counts[1800.0] < 300


def test_long_gaps_go_to_the_state_machine_wait() -> None:
    state, _, invocations = play(1800.0)
    # A 10 s inline budget: gaps above it are Wait states, so invocations ~ HEADs after 500 s.
    assert 10 < invocations < state.poll.head_count


def test_no_inline_budget_means_one_head_per_invocation() -> None:
    _, store, invocations = play(600.0, PollSettings(use_history=False, inline_budget_seconds=0))
    assert invocations == store.heads  # sub-second gaps become Wait 0 (re-invoke at once)
    assert invocations > play(600.0)[2]


def test_stuck_after_timeout() -> None:
    # The timeout counts from the probe's start (the upload began 1 s before the PUT ended).
    state, _, _ = play(None, timeout=300)
    assert state.poll.status == "STUCK" and 299 <= state.poll.last_pending < 300
    assert "timeout 300 s" in state.poll.failure_reason


def test_failed_is_final() -> None:
    state, _, _ = play(7.0, final="FAILED")
    assert state.poll.status == "FAILED" and state.poll.destinations == []


def test_not_before_skips_early_heads_and_flags_a_wrong_prediction() -> None:
    good, _, _ = play(100.0, not_before=50.0)
    assert good.poll.head_count < play(100.0)[0].poll.head_count - 40
    bad, _, _ = play(10.0, not_before=50.0)  # replication beat the prediction: wide interval, honestly kept
    assert bad.poll.first_final - (bad.poll.last_pending or 0) > PollPolicy().bound(10.0)


def test_earliest_completion_needs_history() -> None:
    assert earliest_completion(10**9, [(10**8, 10.0)] * 2) == 0.0
    assert earliest_completion(10**9, [(10**8, 10.0), (10**8, 5.0), (10**6, 0.1)]) == 0.0  # sub-second ignored
    assert earliest_completion(10**9, [(10**8, 10.0), (10**8, 5.0), (10**8, 20.0)]) == 25.0
