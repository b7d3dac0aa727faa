"""(g) The stack's documented uninstall (docs/UNINSTALL.md: schedule DISABLED, then `replmon
uninstall --fleet --stack-name replmon --apply`) leaves no probe object in any bucket, and no
notification entry of replmon's: the stack's own pair, and every registry route's buckets in the
member accounts, reached through each account's prober role (templates/member-account.yaml) under
the IAM evaluator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from replmon.core.defaults import DEFAULTS
from replmon.fleet.enroll import replicas_id
from replmon.local.stack import AWAY, HOME, MEMBER_A
from tests.deployed.scenario import ROUTE, UNTAGGED, deployed, replmon

pytestmark = pytest.mark.deployed


@pytest.fixture(scope="module")
def uninstalled() -> Iterator[dict[str, Any]]:
    """The stack's own pair and the member route both stalled (heartbeats in flight on each), then
    the documented uninstall."""
    with deployed() as stack:
        prefix = str(stack.resolver.ref("ProbePrefix"))
        own = (str(stack.resolver.ref("DemoSourceBucket")), str(stack.resolver.ref("DemoDestinationBucket")))
        stack.advance(minutes=1)
        stack.stall(own[0])
        stack.stall(ROUTE)
        stack.advance(minutes=2)
        before = {b: stack.objects(b, prefix) for b in (*own, ROUTE)}
        stack.schedule("ProbeStateMachine").enabled = False  # step 1: ScheduleState=DISABLED (no run started yet)
        # the member route's buckets are enrolled beside an entry of the owner's (the member-Region topics exist)
        src = stack.admin("s3", MEMBER_A)
        src.put_bucket_notification_configuration(Bucket=ROUTE, NotificationConfiguration={"QueueConfigurations": [
            {"Id": "owners-audit", "QueueArn": f"arn:aws:sqs:{HOME}:{MEMBER_A}:audit", "Events": ["s3:ObjectRemoved:*"]}]})
        for region in (HOME, AWAY):
            stack.admin("sns", MEMBER_A, region).create_topic(Name="replmon-events")
        enrolled = replmon(stack, "fleet", "--stack-name", "replmon", "enroll", "--apply")
        wired = _ids(src, ROUTE), _ids(stack.admin("s3", MEMBER_A, AWAY), "orders-dr")
        code, out = replmon(stack, "uninstall", "--fleet", "--stack-name", "replmon", "--apply")
        after = {b: stack.objects(b, prefix) for b in (*own, ROUTE, "orders-dr", UNTAGGED, "plain-dr")}
        entries = {b: _ids(stack.admin("s3", stack.owners[b], stack.regions[b]), b) for b in (*own, ROUTE, "orders-dr")}
        prober = [c for c in stack.calls if c.principal == f"arn:aws:iam::{MEMBER_A}:role/replmon-prober" and c.function == "operator"]
        yield {"before": before, "after": after, "code": code, "out": out, "own": own, "entries": entries, "prober": prober,
               "enrolled": enrolled, "wired": wired}


def _ids(s3: Any, bucket: str) -> list[str]:
    config = s3.get_bucket_notification_configuration(Bucket=bucket)
    return [e["Id"] for k in ("QueueConfigurations", "TopicConfigurations", "LambdaFunctionConfigurations") for e in config.get(k, [])]


def test_g_the_documented_uninstall_leaves_no_probe_object_in_the_stacks_buckets(uninstalled: dict[str, Any]) -> None:
    assert uninstalled["code"] == 0, uninstalled["out"]
    assert uninstalled["before"][uninstalled["own"][0]], "nothing in flight: the scenario would test nothing"
    assert {b: uninstalled["after"][b] for b in uninstalled["own"]} == {b: [] for b in uninstalled["own"]}


def test_g_the_documented_uninstall_leaves_no_probe_object_in_any_member_bucket(uninstalled: dict[str, Any]) -> None:
    assert uninstalled["code"] == 0, uninstalled["out"]
    assert uninstalled["before"][ROUTE], "nothing in flight: the scenario would test nothing"
    assert uninstalled["after"] == {b: [] for b in uninstalled["after"]}


def test_g_enroll_wires_the_member_route_through_its_prober(uninstalled: dict[str, Any]) -> None:
    """`replmon fleet enroll --apply`: the member source sends s3:Replication:* to its Region's
    member topic beside the owner's entry, its destination (another Region) ObjectCreated on the
    probe prefix to that Region's topic; the hub's queue subscribed to both topics."""
    code, out = uninstalled["enrolled"]
    assert code == 0, out
    assert uninstalled["wired"] == (["owners-audit", "replmon-events"], [replicas_id(DEFAULTS.probe_prefix)])  # the route's probe prefix (the default)
    assert out.count("subscription: arn:aws:sns:") == 2 and "subscribed" in out


def test_g_the_member_buckets_are_reached_as_their_prober_and_keep_the_owners_entries(uninstalled: dict[str, Any]) -> None:
    """Each member call went through the prober role, every one allowed by its policy (the gate
    decides with the evaluator); replmon's notification entries are gone, the owner's is kept."""
    calls = uninstalled["prober"]
    assert {c.operation for c in calls} >= {"ListObjectVersions", "DeleteObjects", "GetBucketNotificationConfiguration",
                                            "PutBucketNotificationConfiguration"}
    assert [c for c in calls if c.denied] == []
    assert uninstalled["entries"] == {**{b: [] for b in uninstalled["entries"]}, ROUTE: ["owners-audit"]}
    assert "then, in this order:" in uninstalled["out"] and "delete the member-account stacks" in uninstalled["out"]
