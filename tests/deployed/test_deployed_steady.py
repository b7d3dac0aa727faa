"""Ten minutes of the fleet as deployed, read by several scenarios (one stack for the module).

The deployed stack, end to end (replmon.local.stack): one hub, two member accounts, two Regions;
every function through its handler with template.yaml's environment and role, every AWS call
decided by the IAM evaluator, the schedules stepped on a clock. Each scenario asserts what an
operator sees: metrics (EMF), fleet alarm states and their notifications, the Heartbeat's message,
`replmon report --fleet`, what is left in the buckets.


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

from replmon.local.stack import AWAY, HOME, HUB, MEMBER_A, MEMBER_B, DeployedStack
from tests.deployed.scenario import PROBE_FUNCTIONS, ROUTE, UNTAGGED, deployed, replmon, uploads

pytestmark = pytest.mark.deployed




@pytest.fixture(scope="module")
def steady() -> Any:
    """Eleven minutes of the fleet as deployed: two probe runs (the 5- and 10-minute ticks), a
    heartbeat a minute, two collector runs (the second reads the first run's completed probes)."""
    with deployed() as stack:
        stack.advance(minutes=11)
        yield stack


def test_a_a_tagged_member_pair_across_regions_is_discovered_and_probed_through_the_handlers(steady: DeployedStack) -> None:
    route = next(r for r in steady.registry() if r.name == ROUTE)
    assert route.source.account == MEMBER_A and route.destinations[0].region == AWAY and route.probing
    assert uploads(steady, ROUTE) == 2  # ProbeClasses 1KiB@5m: one probe at each 5-minute tick
    records = steady.deps("Report").store.query(ROUTE, 0, 4e9)
    assert [r.status.value for r in records] == ["COMPLETED", "COMPLETED"]
    assert len(steady.points("ReplicationLatencySeconds", Route=ROUTE)) == 2
    # The probe's calls were made as member A's prober role, in each bucket's own Region, and allowed.
    heads = [c for c in steady.calls if c.function == "PollReplication" and c.operation == "HeadObject" and c.params["Bucket"] == "orders-dr"]
    assert heads and {(c.principal, c.region) for c in heads} == {(f"arn:aws:iam::{MEMBER_A}:role/replmon-prober", AWAY)}
    assert [c for c in steady.denied() if c.function in PROBE_FUNCTIONS] == []
    # The heartbeat runs on it too, every minute.
    assert len(steady.points("StallSeconds", Route=ROUTE)) >= 11


def test_a_its_rpo_slo_and_rtc_metrics_are_emitted_and_readable(steady: DeployedStack) -> None:
    assert steady.points("RpoSeconds", Route=ROUTE), "no RpoSeconds for the route"
    assert steady.points("SloBurnPage", Route=ROUTE), "no SLO burn for the route"
    readers = [c for c in steady.calls if c.function == "CollectSignals" and c.operation == "GetMetricData"]
    assert any(c.principal == f"arn:aws:iam::{MEMBER_A}:role/replmon-reader" for c in readers), "RTC metrics not read in member A"
    code, out = replmon(steady, "report", "--fleet", "--format", "json")
    assert code == 0, out
    row = next(r for r in __import__("json").loads(out)["fleet"] if r["route"] == ROUTE)
    assert row["rpo_seconds"] is not None and row["verdict"] != "no_data", row


def test_a_the_stacks_own_route_gets_its_rpo_from_the_collector(steady: DeployedStack) -> None:
    """The stack's own route (the StackRoute registry item) through the same wiring: RpoSeconds from
    CollectSignals, with S3's RTC latency read in the hub (the demo pair is the hub's, same Region)."""
    rpo = steady.points("RpoSeconds", Route="primary")
    assert len(rpo) == 2 and all(0 < p.value < 900 for p in rpo)
    assert steady.alarm_state("RpoAboveTargetG00Alarm", "primary") == "OK"
    collected = [i.result for i in steady.invocations if i.function == "CollectSignals"][-1]
    primary = next(r for r in collected["routes"] if r["route"] == "primary")
    assert primary["rpo"]["inputs"]["rtc_replication_latency"] is not None


def test_f_an_untagged_bucket_is_listed_as_not_enrolled_and_never_probed(steady: DeployedStack) -> None:
    untagged = next(r for r in steady.registry() if r.name == UNTAGGED)
    assert not untagged.probing
    assert not [c for c in steady.calls if c.params.get("Bucket") in (UNTAGGED, "plain-dr") and c.operation == "PutObject"]
    _, out = replmon(steady, "fleet")
    row = next(line for line in out.splitlines() if f" {UNTAGGED} " in line)
    assert " off " in row and "NOT_ENROLLED" in row, out


def test_the_harness_gate_refuses_what_a_role_does_not_grant(steady: DeployedStack) -> None:
    """The gate is not vacuous: a hub function reaching a member bucket with its own credentials (no
    member role) is refused (cross-account, no bucket policy), and so is a call outside its role."""
    upload = steady.role_arn("UploadProbe")
    assert steady._authorize("s3", "PutObject", {"Bucket": ROUTE, "Key": "replmon-probes/x"}, HOME, upload)
    assert steady._authorize("dynamodb", "DeleteItem", {"TableName": "replmon-latency"}, HOME, upload)
    assert steady._authorize("s3", "PutObject", {"Bucket": ROUTE, "Key": "replmon-probes/x"}, HOME,
                             f"arn:aws:iam::{MEMBER_A}:role/replmon-prober") == []
    assert steady._authorize("s3", "PutObject", {"Bucket": ROUTE, "Key": "elsewhere/x"}, HOME,
                             f"arn:aws:iam::{MEMBER_A}:role/replmon-prober")
    assert HUB not in (MEMBER_A, MEMBER_B)
