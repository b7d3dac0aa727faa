"""(b) A route's replication stops, then works again: the pages an operator gets, and when.

The deployed stack (replmon.local.stack, tests/deployed/scenario.py); each Metrics Insights alarm
contributor's change of state reaches the page topic through the FleetPagesG00Rule EventBridge rule
("CloudWatch Alarm Contributor State Change", naming the route; docs/ALARMS.md); the Heartbeat's
evidence goes to the ticket topic (REPLMON_EVIDENCE_TOPIC_ARN)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deployed.scenario import ROUTE, UNTAGGED, deployed

pytestmark = pytest.mark.deployed


@pytest.fixture(scope="module")
def stall() -> Iterator[dict[str, Any]]:
    """Three healthy minutes; replication of the route stops for 5 minutes; it works again for 6
    (the Heartbeat reads no stall within 2 minutes; RouteStalled alarms on 1 of 3 one-minute
    periods: OK once three periods read no stall)."""
    with deployed() as stack:
        stack.advance(minutes=3)
        seen: dict[str, Any] = {"stack": stack, "stopped": stack.clock.now()}
        stack.stall(ROUTE)
        stack.advance(minutes=2)
        seen["pages_2min"] = stack.pages(naming=ROUTE, since=seen["stopped"])
        seen["tickets_2min"] = stack.tickets(naming=ROUTE, since=seen["stopped"])
        seen["stalled_2min"] = stack.alarm_state("RouteStalledG00Alarm", ROUTE)
        seen["untagged_2min"] = (stack.pages(naming=UNTAGGED, since=seen["stopped"]), stack.alarm_state("RouteStalledG00Alarm", UNTAGGED))
        stack.advance(minutes=3)
        seen["pages_5min"] = stack.pages(naming=ROUTE, since=seen["stopped"])
        seen["resumed"] = stack.clock.now()
        stack.resume(ROUTE)
        stack.advance(minutes=6)
        seen["final"] = {a: stack.alarm_state(a, ROUTE) for a in ("RouteStalledG00Alarm", "RpoAboveTargetG00Alarm", "RpoUnboundedG00Alarm")}
        seen["pages_end"] = stack.pages(naming=ROUTE, since=seen["stopped"])
        seen["tickets_end"] = stack.tickets(naming=ROUTE, since=seen["stopped"])
        yield seen


def alarms(pages: list[Any]) -> list[str]:
    """The ALARM notifications among ``pages`` (a recovery's OK is not a page)."""
    return [n.source for n in pages if n.state == "ALARM" or (not n.source.startswith("alarm:") and "STALLED" in n.subject)]


def test_b_replication_stops_exactly_one_page_names_the_route_within_two_minutes_and_it_recovers(stall: dict[str, Any]) -> None:
    assert alarms(stall["pages_2min"]) == ["alarm:RouteStalledG00Alarm"], [(n.source, n.state) for n in stall["pages_2min"]]
    assert all(n.at - stall["stopped"] <= 120 for n in stall["pages_2min"])
    page = json.loads(stall["pages_2min"][0].message)
    assert page["detail-type"] == "CloudWatch Alarm Contributor State Change"
    assert page["detail"]["alarmContributor"]["attributes"]["Route"] == ROUTE and page["detail"]["state"]["value"] == "ALARM"
    assert alarms(stall["pages_5min"]) == alarms(stall["pages_2min"])  # no second page while it stays stopped
    assert stall["final"] == {"RouteStalledG00Alarm": "OK", "RpoAboveTargetG00Alarm": "OK", "RpoUnboundedG00Alarm": "OK"}
    assert stall["stack"].points("RpoSeconds", Route=ROUTE), "the RPO of the route was never judged"


def test_b_the_heartbeat_evidence_is_a_ticket_naming_the_route_and_no_other_route_pages(stall: dict[str, Any]) -> None:
    """The Heartbeat (registry routes, member A's prober role) sees the stall and publishes its
    evidence on the ticket topic, naming the route, within 2 minutes; no other route pages."""
    evidence = [n for n in stall["tickets_2min"] if n.source == "Heartbeat"]
    assert evidence and all(n.at - stall["stopped"] <= 120 for n in evidence), [(n.source, n.subject) for n in stall["tickets_2min"]]
    assert not [n for n in stall["pages_2min"] if n.source == "Heartbeat"]
    assert stall["stalled_2min"] == "ALARM"
    assert stall["untagged_2min"] == ([], "OK")


def test_b_once_replication_works_again_the_route_recovers_and_says_so(stall: dict[str, Any]) -> None:
    assert stall["final"]["RouteStalledG00Alarm"] == "OK"
    after = [n for n in stall["pages_end"] if n.at >= stall["resumed"]]
    assert [n.state for n in after if n.source == "alarm:RouteStalledG00Alarm"] == ["OK"]
    assert [n for n in stall["tickets_end"] if n.source == "Heartbeat" and n.at >= stall["resumed"]], \
        "the Heartbeat did not say the route recovered"
