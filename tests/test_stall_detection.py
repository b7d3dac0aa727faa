"""docs/BENCH-STALL.md's detection at a learned E (lab/stalldetect.py, written by `replmon lab
bench-stall --expectations`): measured at E = 20, 60 and 180 s, E learned by the Heartbeat itself,
each fault paged once and within the route's detection bound (signals/stall.py); the page says how."""

from __future__ import annotations

import random

import pytest

from replmon.lab import benchreport
from replmon.lab.stalldetect import history_latencies, seed_history
from replmon.signals.expectation import learn_expectation
from replmon.signals.stall import detection_bound


@pytest.fixture(scope="module")
def detection() -> dict:
    return benchreport.load("bench-stall")["detection"]


def test_detection_was_measured_at_e_20_60_and_180_s_with_e_learned_by_the_heartbeat(detection: dict) -> None:
    runs = {r["expect_s"]: r for r in detection["runs"]}
    assert set(runs) == {20.0, 60.0, 180.0}
    for e, run in runs.items():
        assert run["learned_expect_s"] == e, run["learned_basis"]
        assert run["seeded_hour_items"] == (0 if e == 20.0 else 80)
        assert run["bound_s"] == detection_bound(e, detection["period_s"])
        assert len(run["reps"]) >= 3 and run["denied"] == []


def test_each_fault_paged_once_within_its_bound_and_never_before_a_beat_was_late(detection: dict) -> None:
    """Never before E (a beat put after the fault is late E after its PUT; a probe in flight when
    replication stopped can be the first of the two late beats, so not 2E), never past the bound."""
    for run in detection["runs"]:
        for rep in run["reps"]:
            assert rep["pages"] == 1 and rep["stalled_s"] is not None and rep["page_s"] is not None, rep
            assert run["learned_expect_s"] <= rep["stalled_s"] <= rep["page_s"] <= run["bound_s"], rep
            assert rep["ok_after_heal_s"] is not None


def test_the_page_renders_the_detection_with_its_own_date_and_the_stepped_clock() -> None:
    doc = benchreport.load("bench-stall")
    text = benchreport.render(doc)
    assert "## Detection at a learned expectation E" in text and "stepped (local/stack.py SteppedClock)" in text
    assert f"- date: {doc['detection']['facts']['date']}" in text
    assert text.count("| 20 | 20 (") == 1 and text.count("| 180 | 180 (q0.999 of 4320 heartbeats (180.0 s))") == 1


def test_the_seeded_history_is_learned_as_its_q0999_through_the_hour_items() -> None:
    from replmon.adapters.memtable import MemoryLatencyTable

    store = MemoryLatencyTable()
    now = 1_795_428_000.0 + 6.5 * 3600
    assert seed_history(store, "r", now, 180.0, random.Random(3)) == 80 * 60
    learned = learn_expectation(store, "r", now, floor=20.0, cap=450.0)
    assert (learned.expectation.seconds, learned.expectation.samples, learned.items_read) == (180.0, 4320, 72)
    assert sorted(history_latencies(60.0, 4320, random.Random(0)))[-5:] == [60.0] * 5
    for later in (3600.0, 7200.0):  # the Heartbeat re-learns hourly: the window moves, E stays
        assert learn_expectation(store, "r", now + later, floor=20.0, cap=450.0).expectation.seconds == 180.0
