"""The deployed stack, end to end (replmon.local.stack): one hub, two member accounts, two Regions;
every function through its handler with template.yaml's environment and role, every AWS call
decided by the IAM evaluator, the schedules stepped on a clock. Each scenario asserts what an
operator sees: metrics (EMF), fleet alarm states and their notifications, the Heartbeat's message,
`replmon report --fleet`, what is left in the buckets.

Scenarios that wait for another part of the fleet work are strict xfails naming it.

AWS behaviour the harness encodes (each cited where it is emulated or mapped):
- A cross-account AssumeRole needs the caller's identity policy and the role's trust policy; a
  trust policy's ``sts:ExternalId`` condition refuses a request without it ("AssumeRole", STS API
  reference, https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
- Without s3:ListBucket, HeadObject of a missing key answers 403 (tests/iam.py).
- A replica keeps its source's version id and reports ReplicationStatus REPLICA; the source reports
  PENDING, then COMPLETED or FAILED (tests/fakes.py, docs/REFERENCES.md R6).
- Each Metrics Insights alarm contributor notifies on its own, naming the route
  (AlarmContributorAttributes; docs/ALARMS.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from replmon.local.stack import HOME, MEMBER_A, MEMBER_B, DeployedStack
from tests.deployed.scenario import ROUTE, UNTAGGED, fleet, uploads

pytestmark = pytest.mark.deployed




# ------------------------------------------------------------------------------------------ (a)
# ------------------------------------------------------------------------------------------ (b)
@pytest.mark.xfail(strict=True, reason="needs routemodel: RpoUnbounded/RPO for registry routes, and one page per stall")
def test_b_replication_stops_exactly_one_page_names_the_route_within_two_minutes_and_it_recovers(stack_factory: Any) -> None:
    stack = fleet(stack_factory)
    stack.advance(minutes=6)
    stopped = stack.clock.now()
    stack.stall(ROUTE)
    stack.advance(minutes=2)
    assert len(stack.pages(naming=ROUTE, since=stopped)) == 1, [n.subject for n in stack.pages(since=stopped)]
    stack.advance(minutes=6)
    assert len(stack.pages(naming=ROUTE, since=stopped)) == 1  # no second page while it stays stopped
    stack.resume(ROUTE)
    stack.advance(minutes=6)
    assert stack.alarm_state("RouteStalledG00Alarm", ROUTE) == "OK"
    assert stack.alarm_state("RpoAboveTargetG00Alarm", ROUTE) == "OK"


def test_b_a_stall_is_seen_by_the_heartbeat_and_the_stall_alarm_names_the_route(stack_factory: Any) -> None:
    """What works today: the Heartbeat (registry routes, member prober role) sees the stall, publishes
    its evidence on the page topic, RouteStalled puts the route's contributor in ALARM; both name the
    route, within 2 minutes; after recovery the contributor goes OK and the Heartbeat says so."""
    stack = fleet(stack_factory)
    stack.advance(minutes=3)
    stopped = stack.clock.now()
    stack.stall(ROUTE)
    stack.advance(minutes=2)
    pages = stack.pages(naming=ROUTE, since=stopped)
    assert pages and all(n.at - stopped <= 120 for n in pages), [(n.source, n.at - stopped) for n in stack.pages(since=stopped)]
    assert stack.alarm_state("RouteStalledG00Alarm", ROUTE) == "ALARM"
    assert not stack.pages(naming=UNTAGGED, since=stopped) and stack.alarm_state("RouteStalledG00Alarm", UNTAGGED) == "OK"
    stack.resume(ROUTE)
    stack.advance(minutes=6)
    assert stack.alarm_state("RouteStalledG00Alarm", ROUTE) == "OK", stack.alarm_states["RouteStalledG00Alarm"]
    assert [n.subject.split(":")[0] for n in stack.pages(naming=ROUTE, since=stopped) if n.source.startswith("alarm:")] == ["ALARM", "OK"]


# ------------------------------------------------------------------------------------------ (c)
@pytest.mark.xfail(strict=True, reason="needs routemodel: events map to registry routes (a member bucket's failure event is "
                   "filed under its route, and RpoUnbounded pages for it)")
def test_c_a_failure_event_from_the_member_bucket_pages_naming_its_route(stack_factory: Any) -> None:
    stack = fleet(stack_factory)
    stack.advance(minutes=1)
    sent = stack.clock.now()
    stack.s3_event(ROUTE, "replication_failed", "data/2026/11/26/part-0001.parquet")
    stack.advance(minutes=10)
    # docs/ALARMS.md: ReplicationFailedEvent notifies nobody; RpoUnbounded pages, naming the route.
    pages = stack.pages(naming=ROUTE, since=sent)
    assert [n.source for n in pages] == ["alarm:RpoUnboundedG00Alarm"], [(n.source, n.subject) for n in stack.pages(since=sent)]


def test_c_a_failure_event_from_the_stacks_own_bucket_pages_naming_its_route(stack_factory: Any) -> None:
    """The stack's own route (today's REPLMON_DEFAULTS route) through the same handlers: the event is
    counted under it, the collector reports an unbounded RPO, RpoUnbounded pages naming it."""
    stack = stack_factory()
    stack.advance(minutes=1)
    sent = stack.clock.now()
    source = str(stack.resolver.ref("DemoSourceBucket"))
    stack.s3_event(source, "replication_failed", "data/2026/11/26/part-0001.parquet")
    stack.advance(minutes=10)  # the collector's next run, then the alarm's 5-minute period ends
    assert stack.points("ReplicationEvents", Route="primary", Event="OperationFailedReplication")
    pages = stack.pages(naming="primary", since=sent)
    assert "alarm:RpoUnboundedG00Alarm" in [n.source for n in pages], [(n.source, n.subject) for n in stack.notifications]
    assert stack.alarm_state("RpoUnboundedG00Alarm", "primary") == "ALARM"


# ------------------------------------------------------------------------------------------ (d)
def _hung_fleet(stack_factory: Any) -> tuple[DeployedStack, float]:
    """Route ``plain-src`` (probed today: discovery is opt-out) hangs in UploadProbe at the first tick."""
    stack = fleet(stack_factory)
    stack.hang(UNTAGGED)
    first = stack.schedule("ProbeStateMachine").next
    stack.advance(first - stack.clock.now() + 1)
    stack.advance(minutes=5)
    return stack, first


def test_d_a_hung_route_keeps_its_lease_and_the_other_routes_keep_their_heartbeats(stack_factory: Any) -> None:
    stack, first = _hung_fleet(stack_factory)
    lease = stack.deps("Report").leases
    assert lease is not None
    # The hung route's lease is its run's; the next tick skips it, counted and named.
    skipped = [p for p in stack.points("RunSkipped", Route=UNTAGGED) if p.timestamp > first]
    assert skipped, "the hung route was not skipped at the next tick"
    # The other route's heartbeat kept its minute: a StallSeconds point a minute, no stall.
    beats = [p for p in stack.points("StallSeconds", Route=ROUTE) if p.timestamp >= first]
    assert len(beats) >= 5 and all(p.value == 0 for p in beats)
    assert stack.alarm_state("RouteStalledG00Alarm", ROUTE) == "OK"


@pytest.mark.xfail(strict=True, reason="needs registry: a route's lease released when that route's probes end (not when the Map ends)")
def test_d_one_route_hangs_every_other_route_keeps_its_schedule_and_its_lease(stack_factory: Any) -> None:
    stack, first = _hung_fleet(stack_factory)
    second = first + 300
    assert uploads(stack, ROUTE, since=second) == 1, "the healthy route was not probed at the next tick"
    assert not stack.points("RunSkipped", Route=ROUTE), "the healthy route was skipped"
    assert not stack.tickets(naming=ROUTE)


# ------------------------------------------------------------------------------------------ (e)
def _member_assumes(stack: DeployedStack) -> list[Any]:
    return [c for c in stack.calls if c.operation == "AssumeRole" and c.params["RoleArn"].split(":")[4] in (MEMBER_A, MEMBER_B)]


@pytest.mark.xfail(strict=True, reason="needs xaccount: ExternalId on every member AssumeRole (prober, reader), sts:AssumeRole "
                   "granted to every caller (Housekeeping, CollectSignals)")
def test_e_with_an_external_id_every_cross_account_call_carries_it_and_is_allowed(stack_factory: Any) -> None:
    stack = fleet(stack_factory, member_external_id="replmon-ext-7f3a")
    stack.advance(minutes=6)
    assumes = _member_assumes(stack)
    assert {c.function for c in assumes} >= {"Inventory", "UploadProbe", "PollReplication", "Cleanup", "Heartbeat", "CollectSignals"}
    assert [c for c in assumes if c.params.get("ExternalId") != "replmon-ext-7f3a"] == []
    assert stack.denied() == []
    assert uploads(stack, ROUTE) == 1


def test_e_without_the_external_id_the_member_role_refuses(stack_factory: Any) -> None:
    """The member roles require it (templates/member-account.yaml ExternalId): the inventory sends it
    and is let in; an AssumeRole without it is refused by the trust policy, and the step fails as
    it would in AWS (AccessDenied raised to the code, the probe not uploaded)."""
    stack = fleet(stack_factory, member_external_id="replmon-ext-7f3a")
    inventory = [c for c in _member_assumes(stack) if c.function == "Inventory"]
    assert inventory and all(c.params.get("ExternalId") == "replmon-ext-7f3a" and not c.denied for c in inventory)
    stack.advance(minutes=6)
    without = [c for c in _member_assumes(stack) if not c.params.get("ExternalId")]
    assert without and all(c.denied for c in without)
    # The same call with it would have been let in: the refusal is the ExternalId's.
    call = without[0]
    assert stack._authorize("sts", "AssumeRole", {**call.params, "ExternalId": "replmon-ext-7f3a"}, HOME, call.principal) == [] \
        or call.function in ("Housekeeping", "CollectSignals")
    assert uploads(stack, ROUTE) == 1 and not any(c.operation == "PutObject" and c.params["Bucket"] == ROUTE for c in stack.calls)


# ------------------------------------------------------------------------------------------ (f)
# ------------------------------------------------------------------------------------------ (g)
def _uninstall(stack: DeployedStack) -> tuple[int, str]:
    stack.schedule("ProbeStateMachine").enabled = False  # docs/UNINSTALL.md step 1: ScheduleState=DISABLED
    stack.advance(minutes=1)
    return stack.cli("uninstall", "--stack-name", "replmon", "--apply")


def test_g_the_documented_uninstall_leaves_no_probe_object_in_the_stacks_buckets(stack_factory: Any) -> None:
    """The stack's own pair, stalled, holds a probe and heartbeats in flight; `replmon uninstall
    --stack-name replmon --apply` (docs/UNINSTALL.md step 3) removes every version of them."""
    stack = stack_factory()
    source, replica = str(stack.resolver.ref("DemoSourceBucket")), str(stack.resolver.ref("DemoDestinationBucket"))
    stack.advance(minutes=3)
    stack.stall(source)
    stack.advance(minutes=3)
    prefix = str(stack.resolver.ref("ProbePrefix"))
    assert stack.objects(source, prefix), "nothing in flight: the scenario would test nothing"
    code, out = _uninstall(stack)
    assert code == 0, out
    for bucket in (source, replica):
        assert stack.objects(bucket, prefix) == [], bucket


@pytest.mark.xfail(strict=True, reason="needs lead: `replmon uninstall` covers the registry's member buckets (today: the stack's "
                   "own pair only); a stalled route's pending heartbeats are left in member A")
def test_g_the_documented_uninstall_leaves_no_probe_object_in_any_member_bucket(stack_factory: Any) -> None:
    stack = fleet(stack_factory)
    stack.advance(minutes=3)
    stack.stall(ROUTE)
    stack.advance(minutes=3)
    prefix = str(stack.resolver.ref("ProbePrefix"))
    assert stack.objects(ROUTE, prefix), "the stall left nothing to remove: the scenario tests nothing"
    code, out = _uninstall(stack)
    assert code == 0, out
    for bucket in (ROUTE, "orders-dr", UNTAGGED, "plain-dr"):
        assert stack.objects(bucket, prefix) == [], bucket

