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
EXTERNAL_ID = "replmon-ext-7f3a"




@pytest.fixture(scope="module")
def steady() -> Any:
    """Eleven minutes of the fleet as deployed: two probe runs (the 5- and 10-minute ticks), a
    heartbeat a minute, two collector runs (the second reads the first run's completed probes); the
    member roles require an ExternalId, the hub's MemberExternalId sends it (scenario (e))."""
    with deployed(member_external_id=EXTERNAL_ID) as stack:
        stack.advance(minutes=11)
        yield stack


def test_a_a_tagged_member_pair_across_regions_is_discovered_and_probed_through_the_handlers(steady: DeployedStack) -> None:
    route = next(r for r in steady.registry() if r.name == ROUTE)
    assert route.source.account == MEMBER_A and route.destinations[0].region == AWAY and route.probing
    assert uploads(steady, ROUTE) == 2  # ExpertSettings probe_classes 1KiB@5m (the harness): one probe at each 5-minute tick
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
    # The SLO is judged every run; a healthy route burns nothing, and the sparse burn pair is not emitted at 0.
    judged = [next(r for r in i.result["routes"] if r["route"] == ROUTE) for i in steady.invocations if i.function == "CollectSignals"]
    assert judged and all(r["slo"]["judged"] and not any(r["slo"]["burn_rates"].values()) for r in judged), judged
    assert not steady.points("SloBurnPage", Route=ROUTE) and not steady.points("RpoUnbounded", Route=ROUTE)
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
    _, out = replmon(steady, "fleet", "--format", "csv")  # csv: no column is cut at the runner's width
    row = next(line.split(",") for line in out.splitlines() if UNTAGGED in line.split(","))
    assert "off" in row and "NOT_ENROLLED" in row, out


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


# (e) With MemberExternalId set (and the member roles requiring it), every cross-account call carries it;
# without it the member role refuses. AWS: a cross-account AssumeRole needs the caller's identity policy
# and the role's trust policy; a trust policy's ``sts:ExternalId`` condition refuses a request without
# it ("AssumeRole", STS API reference, https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html).
def member_assumes(stack: DeployedStack) -> list[Any]:
    return [c for c in stack.calls if c.operation == "AssumeRole" and c.params["RoleArn"].split(":")[4] in (MEMBER_A, MEMBER_B)]


def test_e_with_an_external_id_every_cross_account_call_carries_it_and_is_allowed(steady: DeployedStack) -> None:
    assumes = member_assumes(steady)
    assert {c.function for c in assumes} >= {"Inventory", "UploadProbe", "PollReplication", "Cleanup", "Housekeeping", "Heartbeat",
                                             "CollectSignals"}
    # CollectSignals reads S3's replication metrics as the member's reader role, every other caller as its prober
    assert {c.params["RoleArn"].split("/")[-1] for c in assumes if c.function == "CollectSignals"} == {"replmon-reader"}
    assert [c for c in assumes if c.params.get("ExternalId") != EXTERNAL_ID] == []
    assert steady.denied() == []
    assert uploads(steady, ROUTE) == 2 and steady.deps("Report").store.query(ROUTE, 0, 4e9)


def test_e_without_the_external_id_the_member_role_refuses(steady: DeployedStack) -> None:
    """The member roles require it (templates/member-account.yaml ExternalId): each member AssumeRole
    the functions made, replayed without it, is refused by the role's trust policy, and let in with
    it (the refusal is the ExternalId's: the caller's role allows the call)."""
    for c in {(c.function, c.params["RoleArn"]): c for c in member_assumes(steady)}.values():
        without = {k: v for k, v in c.params.items() if k != "ExternalId"}
        assert steady._authorize("sts", "AssumeRole", without, HOME, c.principal), (c.function, c.params["RoleArn"])
        assert steady._authorize("sts", "AssumeRole", {**without, "ExternalId": "wrong"}, HOME, c.principal)
        assert steady._authorize("sts", "AssumeRole", {**without, "ExternalId": EXTERNAL_ID}, HOME, c.principal) == []
