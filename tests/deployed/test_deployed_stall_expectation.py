"""A route whose learned expectation E is 60 s, as deployed: the Heartbeat learns E from the route's
72 hour items (seeded with 80 hours of heartbeats whose q0.999 is 60 s), a stall pages once, within
the route's detection bound T + 2 (E + 15 s) + 60 s (signals/stall.py), and every call the functions
made was allowed by their roles (tests/iam.py)."""

from __future__ import annotations

import pytest

from replmon.lab.stalldetect import measure_detection
from replmon.signals.stall import detection_bound
from tests.deployed.scenario import TestsAuthorizer

pytestmark = pytest.mark.deployed


def test_a_route_with_a_learned_e_of_60_s_pages_once_within_its_detection_bound() -> None:
    out = measure_detection([60.0], 1, authorizer=TestsAuthorizer(), iam="tests/iam.py")
    run = out["runs"][0]
    assert run["learned_expect_s"] == 60.0 and run["learned_basis"] == "q0.999 of 4320 heartbeats (60.0 s)"
    assert run["seeded_hour_items"] == 80 and run["bound_s"] == detection_bound(60.0, 60) == 270.0
    rep = run["reps"][0]
    assert rep["pages"] == 1 and rep["stalled_s"] is not None and rep["page_s"] is not None
    assert 60 <= rep["stalled_s"] <= rep["page_s"] <= run["bound_s"], rep  # a late beat first: never before E
    assert rep["ok_after_heal_s"] is not None
    assert run["denied"] == []
