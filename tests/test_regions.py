"""Routes across Regions and accounts: every replication metric is read, and
alarmed, in the Region S3 publishes it in; events from buckets in other Regions and accounts reach
the stack over the only path S3 supports.

AWS's contracts encoded here:

- "Using S3 Replication metrics" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/repl-metrics.html):
  ReplicationLatency, BytesPendingReplication and OperationsPendingReplication are "published in
  the Region of the destination bucket"; OperationsFailedReplication "in the Region of the source
  bucket".
- "Metrics and dimensions" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/metrics-dimensions.html):
  namespace AWS/S3, dimensions SourceBucket, DestinationBucket, RuleId; ReplicationLatency,
  BytesPending, OperationsPending valid statistic Max; OperationsFailedReplication Sum; alarms
  should treat missing data as ignore.
- "CloudWatch cross-account observability" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Unified-Cross-Account.html):
  CloudWatch data is regional; a GetMetricData call reads its endpoint's Region.
- Metrics Insights alarms need GROUP BY and ORDER BY to evaluate many series.
- GetMetricData (CloudWatch API reference): "A single GetMetricData call can include as many
  as 500 MetricDataQuery structures"; each Id unique within the call, a lowercase letter first.
- "Event notification types and destinations" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-event-types-and-destinations.html):
  "The Amazon SQS queue must be in the same AWS Region as your Amazon S3 bucket", the same for topics.
- "Using EventBridge" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/EventBridge.html):
  no replication event type is sent to EventBridge.
- "Granting permissions to publish event notification messages to a destination"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/grant-destinations-permissions-to-s3.html):
  the topic policy admits s3.amazonaws.com with aws:SourceAccount / aws:SourceArn.
- "Sending Amazon SNS messages to an Amazon SQS queue or AWS Lambda function in a different
  Region" (https://docs.aws.amazon.com/sns/latest/dg/sns-cross-region-delivery.html): SNS delivers
  to SQS across Regions and accounts; the queue policy admits sns.amazonaws.com by aws:SourceArn.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from replmon.adapters.cloudwatch import CloudWatchReaders
from replmon.core.ports import ReaderKey
from replmon.core.record import PARTITION_KEY
from replmon.core.route import Route
from replmon.local.cfn import Resolver
from replmon.local.template import load_template
from replmon.signals.collector import collect
from replmon.signals.rtc import METRIC_REGION, NAMESPACE, RTC_METRICS, collect_rtc, queries_for
from replmon.signals.s3events import parse_payload
from tests.cfnutil import ACCOUNT, REGION, resolver, transformed
from tests.conftest import ROOT, TEMPLATE
from tests.iam import simulate

TOKYO, SINGAPORE = "ap-northeast-1", "ap-southeast-1"
MEMBER_REGION = ROOT / "templates" / "member-region.yaml"
MEMBER, FOREIGN = "210987654321", "999988887777"
OPT_IN = {"ap-east-1", "me-south-1"}  # Regions whose SNS principal is sns.<region>.amazonaws.com
DIMENSIONS = {"SourceBucket", "DestinationBucket", "RuleId"}


def cross_region_route() -> Route:
    return Route.model_validate({"name": "tokyo-singapore", "source": {"bucket": "src-tokyo", "region": TOKYO},
                                 "destinations": [{"bucket": "dst-singapore", "region": SINGAPORE, "rule_id": "rule-1"},
                                                  {"bucket": "dst-tokyo", "rule_id": "rule-2"}]})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        yield


# ------------------------------------------------------------------------------ metrics where S3 publishes them
def publish_as_s3_does(now: float) -> None:
    """The Tokyo -> Singapore pair's four metrics, each in the Region S3 publishes it in."""
    dims = {"SourceBucket": "src-tokyo", "DestinationBucket": "dst-singapore", "RuleId": "rule-1"}
    for metric, region, value in (("ReplicationLatency", SINGAPORE, 42.0), ("BytesPendingReplication", SINGAPORE, 1024.0),
                                  ("OperationsPendingReplication", SINGAPORE, 3.0), ("OperationsFailedReplication", TOKYO, 2.0)):
        boto3.client("cloudwatch", region_name=region).put_metric_data(Namespace=NAMESPACE, MetricData=[{
            "MetricName": metric, "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()], "Value": value,
            "Timestamp": datetime.fromtimestamp(now - 120, UTC), "Unit": RTC_METRICS[metric][1]}])


def test_every_query_names_the_region_s3_publishes_its_metric_in() -> None:
    route = cross_region_route()
    got = [(k.region, q.metric, dict(q.dimensions)["DestinationBucket"]) for k, q in queries_for(route)]
    assert len(got) == 8
    for region, metric, dst in got:
        bucket_region = {"dst-singapore": SINGAPORE, "dst-tokyo": TOKYO}[dst]  # a destination without a Region is in the source's
        assert region == (bucket_region if METRIC_REGION[metric] == "destination" else TOKYO), (metric, dst, region)
    assert METRIC_REGION == {"ReplicationLatency": "destination", "BytesPendingReplication": "destination",
                             "OperationsPendingReplication": "destination", "OperationsFailedReplication": "source"}


def test_a_cross_region_route_reads_each_metric_with_a_client_in_its_region(aws: None) -> None:
    """moto's CloudWatch keeps each Region's metrics apart, as AWS does: S3's metrics are put where
    S3 publishes them, and each GetMetricData call is recorded with its client's Region."""
    route = cross_region_route()
    now = datetime.now(UTC).timestamp()
    publish_as_s3_does(now)
    readers = CloudWatchReaders()
    calls: list[tuple[str, str]] = []  # (client Region, metric) of every query sent
    for key in {k for k, _ in queries_for(route)}:
        client = readers(key).client

        def record(params: dict[str, Any], _client: Any = client, **_: Any) -> None:
            calls.extend((_client.meta.region_name, q["MetricStat"]["Metric"]["MetricName"]) for q in params["MetricDataQueries"])

        client.meta.events.register("provide-client-params.cloudwatch.GetMetricData", record)
    samples = {s.destination: s for s in collect_rtc(readers, route, now)}
    assert sorted(calls) == sorted((r, m) for r, m in [(SINGAPORE, m) for m in METRIC_REGION if METRIC_REGION[m] == "destination"]
                                   + [(TOKYO, m) for m in METRIC_REGION if METRIC_REGION[m] == "destination"]
                                   + [(TOKYO, "OperationsFailedReplication")] * 2)
    sg = samples["dst-singapore"].series
    assert (sg["ReplicationLatency"].latest, sg["BytesPendingReplication"].latest, sg["OperationsPendingReplication"].latest,
            sg["OperationsFailedReplication"].latest) == (42.0, 1024.0, 3.0, 2.0)
    assert samples["dst-singapore"].missing == [] and len(samples["dst-tokyo"].missing) == 4
    # The defect this replaces: one client in the stack's Region saw none of the four.
    [old] = [s for s in collect_rtc(lambda key: readers(ReaderKey(None, REGION)), route, now) if s.destination == "dst-singapore"]
    assert len(old.missing) == 4


def test_a_fleets_metrics_are_read_in_calls_of_at_most_500_queries_with_the_same_values(aws: None) -> None:
    """152 routes (151 Tokyo -> Singapore, each with a second, same-Region destination) are read in as
    few GetMetricData calls as the API allows - at most 500 queries each, per Region - and every
    route's samples are what its own read gives (moto keeps the Regions apart); routes with data
    sit in every call, and one of them (fleet-98) has its queries split across two calls."""
    from replmon.signals.rtc import MAX_QUERIES_PER_CALL, collect_rtc_fleet

    now = datetime.now(UTC).timestamp()
    publish_as_s3_does(now)
    same = Route.model_validate({"name": "same", "source": {"bucket": "src-same", "region": TOKYO},
                                 "destinations": [{"bucket": "dst-same", "rule_id": "r"}]})
    routes = [same, cross_region_route()] + [
        Route.model_validate({"name": f"fleet-{i}", "source": {"bucket": f"src-{i}", "region": TOKYO},
                              "destinations": [{"bucket": f"dst-{i}", "region": SINGAPORE, "rule_id": "r"},
                                               {"bucket": f"dst-tokyo-{i}", "rule_id": "r"}]}) for i in range(150)]
    for i, value in ((49, 5.0), (98, 6.0), (149, 7.0)):  # the first Tokyo call, split across both, the second
        for metric, region in (("ReplicationLatency", SINGAPORE), ("OperationsFailedReplication", TOKYO)):
            dims = {"SourceBucket": f"src-{i}", "DestinationBucket": f"dst-{i}", "RuleId": "r"}
            boto3.client("cloudwatch", region_name=region).put_metric_data(Namespace=NAMESPACE, MetricData=[{
                "MetricName": metric, "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()], "Value": value,
                "Timestamp": datetime.fromtimestamp(now - 120, UTC), "Unit": RTC_METRICS[metric][1]}])
    readers = CloudWatchReaders()
    sizes: list[tuple[str, int]] = []  # (client Region, queries in the call)
    for key in {k for r in routes for k, _ in queries_for(r)}:
        client = readers(key).client

        def record(params: dict[str, Any], _client: Any = client, **_: Any) -> None:
            if "NextToken" not in params:
                sizes.append((_client.meta.region_name, len(params["MetricDataQueries"])))

        client.meta.events.register("provide-client-params.cloudwatch.GetMetricData", record)
    got = collect_rtc_fleet(readers, routes, now)
    # Singapore: 3 metrics x 151 routes = 453 queries; Tokyo: 4 + (1 + 4) x 151 = 759 -> 500 + 259
    assert sorted(sizes) == [(TOKYO, 259), (TOKYO, 500), (SINGAPORE, 453)] and got.calls == 3 and got.failed == {}
    assert max(n for _, n in sizes) <= MAX_QUERIES_PER_CALL
    for r in routes:
        assert [x.to_item() for x in got.samples[r.name]] == [x.to_item() for x in collect_rtc(readers, r, now)], r.name
    for i, value in ((49, 5.0), (98, 6.0), (149, 7.0)):
        sg = got.samples[f"fleet-{i}"][0].series
        assert (sg["ReplicationLatency"].latest, sg["OperationsFailedReplication"].latest) == (value, value)
    assert got.samples["tokyo-singapore"][0].series["ReplicationLatency"].latest == 42.0


def test_a_failed_call_fails_only_the_routes_with_a_query_in_it(aws: None) -> None:
    """Tokyo's second call fails: exactly the routes with a query in it are named (with the error), the
    others are read; CollectSignals counts RtcReadFailed for those alone and still evaluates them."""
    from replmon.signals.rtc import collect_rtc_fleet
    from replmon.signals.slo import SloSpec

    routes = [Route.model_validate({"name": f"fleet-{i}", "source": {"bucket": f"src-{i}", "region": TOKYO},
                                    "destinations": [{"bucket": f"dst-{i}", "rule_id": "r"}]}) for i in range(130)]  # 4 queries each
    good, calls = CloudWatchReaders(), []

    class Flaky:
        def __init__(self, key: ReaderKey) -> None:
            self.key = key

        def read(self, qs: Any, start: float, end: float) -> Any:
            calls.append(len(qs))
            if len(calls) == 2:
                raise PermissionError("ThrottlingException: Rate exceeded")
            return good(self.key).read(qs, start, end)

    now = datetime.now(UTC).timestamp()
    got = collect_rtc_fleet(Flaky, routes, now)
    assert calls == [500, 20]  # 520 queries: 125 routes, then 5
    assert sorted(got.failed) == sorted(f"fleet-{i}" for i in range(125, 130))
    assert all("ThrottlingException" in why for why in got.failed.values()) and len(got.samples) == 125
    calls.clear()
    metrics, table = _Metrics(), _Table()
    out = collect(routes, table, Flaky, metrics, now, SloSpec(), 3600, 1)  # type: ignore[arg-type]
    assert len(out) == 130 and sorted(d["Route"] for n, d in metrics.counted if n == "RtcReadFailed") == sorted(got.failed)
    assert len(table.put) == 125  # one sample a route read


def test_a_query_cloudwatch_could_not_answer_is_a_failed_read_not_an_idle_route() -> None:
    """MetricDataResult.StatusCode InternalError or Forbidden (API reference: Complete | InternalError |
    PartialData | Forbidden) is not "no data": the read fails and its routes are RtcReadFailed."""
    from replmon.adapters.cloudwatch import CloudWatchReader
    from replmon.core.ports import MetricQuery

    class Client:
        def get_metric_data(self, **_: Any) -> dict[str, Any]:
            return {"MetricDataResults": [{"Id": "m0_replicationlatency", "StatusCode": "Forbidden", "Timestamps": [], "Values": [],
                                           "Messages": [{"Code": "Forbidden", "Value": "no access to the account's metrics"}]}]}

    q = MetricQuery("m0_replicationlatency", NAMESPACE, "ReplicationLatency", (("SourceBucket", "s"),), 60, "Maximum")
    with pytest.raises(RuntimeError, match="Forbidden"):
        CloudWatchReader(Client()).read([q], 0.0, 60.0)


class _Table:
    """The LatencyTable calls collect() makes, over nothing stored."""

    def __init__(self) -> None:
        self.put: list[dict[str, Any]] = []

    def query(self, *_: Any) -> list[Any]:
        return []

    def items(self, pk: str, *_: Any) -> list[Any]:
        return [i for i in self.put if i[PARTITION_KEY] == pk]

    def partition_items(self, *_: Any) -> list[Any]:
        return []

    def get_item(self, *_: Any) -> None:  # no heartbeat state
        return None

    def roll_items(self, *_: Any, **__: Any) -> list[Any]:  # the hour items' event counters
        return []

    def put_item(self, item: dict[str, Any]) -> None:
        self.put.append(item)

    def put_period(self, *_: Any) -> bool:  # the SLO's period cache (signals/slo_rollup.py), over no hours
        return True


class _Metrics:
    def __init__(self) -> None:
        self.counted: list[tuple[str, dict[str, str]]] = []
        self.values: dict[tuple[str, str | None], float] = {}

    def count(self, name: str, value: float = 1, dimensions: dict[str, str] | None = None, **_: Any) -> None:
        self.counted.append((name, dict(dimensions or {})))
        self.values[(name, (dimensions or {}).get("Route"))] = value

    def __getattr__(self, _: str) -> Any:
        return lambda *a, **k: None


def test_a_region_that_cannot_be_read_marks_only_its_route(aws: None) -> None:
    """A Region whose read is denied fails only its route's RTC read (counted, RtcReadFailed); the
    route is still evaluated, and a route whose metrics live elsewhere is read and stored."""
    from replmon.signals.slo import SloSpec

    good = CloudWatchReaders()

    def readers(key: ReaderKey) -> Any:
        if key.region == SINGAPORE:
            raise PermissionError("AccessDenied: cloudwatch:GetMetricData in ap-southeast-1")
        return good(key)

    metrics, table = _Metrics(), _Table()
    same = Route.model_validate({"name": "same", "source": {"bucket": "src-same", "region": TOKYO},
                                 "destinations": [{"bucket": "dst-same", "rule_id": "r"}]})
    out = collect([cross_region_route(), same], table, readers, metrics, datetime.now(UTC).timestamp(), SloSpec(), 3600, 1)  # type: ignore[arg-type]
    assert [h.route for h in out] == ["tokyo-singapore", "same"]
    assert [d.get("Route") for n, d in metrics.counted if n == "RtcReadFailed"] == ["tokyo-singapore"]
    assert len(table.put) == 1  # the same-Region route's one (rule, destination) sample


def test_the_stacks_pending_bytes_metric_gets_the_destination_regions_value(aws: None) -> None:
    """PendingBytesAlarm watches RtcBytesPending, which CollectSignals now emits from the value read
    in the destination's Region (read in the stack's Region it never had data for a cross-Region route)."""
    from replmon.signals.slo import SloSpec

    now = datetime.now(UTC).timestamp()
    publish_as_s3_does(now)
    metrics, table = _Metrics(), _Table()
    [h] = collect([cross_region_route()], table, CloudWatchReaders(), metrics, now, SloSpec(), 3600, 1)  # type: ignore[arg-type]
    assert metrics.values[("RtcBytesPending", "tokyo-singapore")] == 1024.0
    assert metrics.values[("RtcOperationsPending", "tokyo-singapore")] == 3.0
    assert h.rpo.inputs.get("rtc_replication_latency") == 42.0, h.rpo.inputs


# ------------------------------------------------------------------------------ alarms where S3 publishes the metrics
MI = re.compile(r'^SELECT (MAX|SUM)\((\w+)\) FROM SCHEMA\("AWS/S3", ([\w, ]+)\) GROUP BY ([\w, ]+) ORDER BY (MAX|SUM)\(\) DESC LIMIT (\d+)$')


def member_alarms() -> dict[str, dict[str, Any]]:
    res = load_template(MEMBER_REGION)["Resources"]
    return {k: v["Properties"] for k, v in res.items() if v["Type"] == "AWS::CloudWatch::Alarm"}


def test_the_member_region_alarms_query_s3s_documented_metrics() -> None:
    """Each alarm is a Metrics Insights query over exactly S3's three replication dimensions
    (SCHEMA matches the exact dimension set), with the statistic S3 documents for the metric,
    GROUP BY the three (one contributor per rule) and ORDER BY (required for a multi-series alarm)."""
    seen = {}
    for name, p in member_alarms().items():
        [q] = p["Metrics"]
        m = MI.match(q["Expression"])
        assert m, (name, q["Expression"])
        stat, metric, schema, group, order, limit = m.groups()
        assert metric in RTC_METRICS and stat == order == {"Maximum": "MAX", "Sum": "SUM"}[RTC_METRICS[metric][0]], name
        assert {d.strip() for d in schema.split(",")} == DIMENSIONS == {d.strip() for d in group.split(",")}, name
        assert int(limit) <= 500 and q["Period"] % 60 == 0 and q["ReturnData"] is True
        # Missing data: S3's advice (ignore) for the metrics it keeps publishing; none = no failure for the failure count.
        assert p["TreatMissingData"] == ("notBreaching" if metric == "OperationsFailedReplication" else "ignore"), name
        seen[metric] = name
    assert {"ReplicationLatency", "BytesPendingReplication", "OperationsFailedReplication"} <= set(seen)


def test_the_member_region_pending_bytes_alarm_clears_a_probe_in_transfer() -> None:
    """PendingBytesAlarmBytes: at least twice the largest default probe, read over 15 minutes (RTC's threshold)."""
    from replmon.core.defaults import DEFAULTS
    from replmon.core.sizes import parse_size

    t = load_template(MEMBER_REGION)
    sizes = DEFAULTS.sizes.split(",") + [c.split("@")[0] for c in DEFAULTS.probe_classes.split(",")]
    largest = max(parse_size(s) for s in sizes)
    assert int(t["Parameters"]["PendingBytesAlarmBytes"]["Default"]) >= 2 * largest
    p = member_alarms()["PendingBytesHighAlarm"]
    assert p["Metrics"][0]["Period"] * p["EvaluationPeriods"] >= 900 and p["DatapointsToAlarm"] == p["EvaluationPeriods"]


def test_the_member_region_template_is_plain_cloudformation_and_hub_stack_alarms_stay_in_their_region() -> None:
    """StackSets refuse the SAM transform; an AWS/S3 alarm in the hub stack exists only for the
    demo pair, which is same-Region by construction."""
    t = load_template(MEMBER_REGION)
    assert "Transform" not in t and all(not v["Type"].startswith("AWS::Serverless") for v in t["Resources"].values())
    hub = load_template(TEMPLATE)["Resources"]
    for name, res in hub.items():
        if res["Type"] == "AWS::CloudWatch::Alarm" and res["Properties"].get("Namespace") == "AWS/S3":
            assert res.get("Condition") == "CreateDemo", name


# ------------------------------------------------------------------------------ events from other Regions and accounts
def member_resolver(account: str = MEMBER, hub: str = ACCOUNT, region: str = SINGAPORE) -> Resolver:
    return Resolver(load_template(MEMBER_REGION), {"HubAccountId": hub, "HubQueueArn": f"arn:aws:sqs:{REGION}:{hub}:replmon-EventsQueue"},
                    region=region, account=account, stack="replmon-member",
                    physical={"EventsTopic": f"arn:aws:sns:{region}:{account}:replmon-events"})


def test_s3_may_publish_to_the_member_topic_only_from_its_own_account() -> None:
    r = member_resolver()
    t = load_template(MEMBER_REGION)["Resources"]
    policy = r.resolve(t["EventsTopicPolicy"]["Properties"]["PolicyDocument"])
    topic = f"arn:aws:sns:{SINGAPORE}:{MEMBER}:replmon-events"
    cases = {"own bucket": (MEMBER, "s3.amazonaws.com"), "foreign bucket": (FOREIGN, "s3.amazonaws.com")}
    batch = [{"id": k, "principal": p, "action": "sns:Publish", "resource": topic, "accountId": MEMBER,
              "context": {"aws:SourceAccount": a, "aws:SourceArn": "arn:aws:s3:::dst-singapore"}, "resourcePolicy": policy}
             for k, (a, p) in cases.items()]
    hub_queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:replmon-EventsQueue"
    hub_role = {"name": "subscribe", "policy": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sns:Subscribe", "Resource": f"arn:aws:sns:*:*:{'replmon-events'}"}]}}
    for k, (endpoint, proto) in {"hub queue": (hub_queue, "sqs"), "other queue": (f"arn:aws:sqs:{REGION}:{ACCOUNT}:x", "sqs"),
                                 "hub over http": ("https://example.invalid/", "https")}.items():
        batch.append({"id": k, "principal": f"arn:aws:iam::{ACCOUNT}:role/replmon-Inventory", "action": "sns:Subscribe", "resource": topic,
                      "accountId": MEMBER, "context": {"sns:Protocol": proto, "sns:Endpoint": endpoint}, "resourcePolicy": policy,
                      "identityPolicies": [hub_role]})  # cross-account: the hub role's own policy must allow it too
    got = {k: v["result"] for k, v in simulate(batch).items()}
    assert got["own bucket"] == "Allowed" and got["foreign bucket"] != "Allowed", got
    assert got["hub queue"] == "Allowed" and got["other queue"] != "Allowed" and got["hub over http"] != "Allowed", got
    sub = t["HubQueueSubscription"]
    assert sub["Properties"]["RawMessageDelivery"] is True and sub["Properties"]["Protocol"] == "sqs"
    key = r.resolve(t["EventsTopicKey"]["Properties"]["KeyPolicy"])
    s3 = [s for s in key["Statement"] if s.get("Principal") == {"Service": "s3.amazonaws.com"}]
    assert s3 and {"kms:GenerateDataKey*", "kms:Decrypt"} <= set(s3[0]["Action"])  # S3 publishes to an encrypted topic


def queue_checks(accounts: list[str], topics: dict[str, str], opt_in: list[str] | None = None) -> dict[str, str]:
    """Each topic delivering to the hub queue, as SNS's principal for the topic's Region (SNS cross-Region delivery, page above:
    ``sns.<region>.amazonaws.com`` for an opt-in Region)."""
    cfn = transformed()
    r = resolver(cfn, "existing")
    r.params["EventSourceAccounts"] = accounts
    r.params["EventSourceOptInRegions"] = opt_in or [""]
    queue = r.resolve({"Fn::GetAtt": ["EventsQueue", "Arn"]})
    policy = r.resolve(cfn["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"])
    batch = [{"id": label, "principal": f"sns.{arn.split(':')[3]}.amazonaws.com" if arn.split(":")[3] in OPT_IN else "sns.amazonaws.com",
              "action": "sqs:SendMessage", "resource": queue, "accountId": ACCOUNT,
              "context": {"aws:SourceArn": arn, "aws:SourceAccount": arn.split(":")[4]}, "resourcePolicy": policy}
             for label, arn in topics.items()]
    return {k: v["result"] for k, v in simulate(batch).items()}


def test_the_hub_queue_admits_listed_accounts_member_topics_only() -> None:
    topics = {"member Singapore": f"arn:aws:sns:{SINGAPORE}:{MEMBER}:replmon-events",
              "hub Tokyo": f"arn:aws:sns:{TOKYO}:{ACCOUNT}:replmon-events",
              "member other topic": f"arn:aws:sns:{SINGAPORE}:{MEMBER}:something-else",
              "unlisted account": f"arn:aws:sns:{SINGAPORE}:{FOREIGN}:replmon-events"}
    got = queue_checks([MEMBER, ACCOUNT], topics)
    assert got["member Singapore"] == got["hub Tokyo"] == "Allowed", got
    assert got["member other topic"] != "Allowed" and got["unlisted account"] != "Allowed", got
    none = queue_checks([""], topics)  # the default: no SNS statement at all
    assert "Allowed" not in none.values(), none
    hong_kong = {"member Hong Kong": f"arn:aws:sns:ap-east-1:{MEMBER}:replmon-events"}
    assert queue_checks([MEMBER], hong_kong) == {"member Hong Kong": "ImplicitlyDenied"}  # an opt-in Region's principal, unlisted
    got = queue_checks([MEMBER], {**hong_kong, **topics}, opt_in=["ap-east-1"])
    assert got["member Hong Kong"] == got["member Singapore"] == "Allowed" and got["unlisted account"] != "Allowed", got


def test_a_raw_delivered_member_notification_is_read_as_s3_sent_it() -> None:
    """RawMessageDelivery: the SQS body is S3's notification itself (as from a same-Region bucket)."""
    body = (ROOT / "events" / "s3" / "replication_failed.json").read_text()
    msg = {"messageId": "m1", "receiptHandle": "h", "body": body, "attributes": {}, "messageAttributes": {}, "md5OfBody": "",
           "eventSource": "aws:sqs", "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:q", "awsRegion": REGION}
    [parsed] = parse_payload({"Records": [msg]})
    assert parsed.error is None and type(parsed.signal).__name__ == "ReplicationEvent", parsed


def test_docs_send_other_region_buckets_to_their_regions_topic() -> None:
    """DEPLOY.md never tells a user to point a bucket at the stack's queue across Regions (S3 refuses),
    nor to use EventBridge for replication events (S3 sends none there)."""
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    assert "member-region.yaml" in text and "EventSourceAccounts" in text and "RawMessageDelivery" in text
    for para in text.split("\n\n"):
        low = para.lower()
        if "eventbridge" in low and "replication" in low:
            assert "no replication" in low or "not" in low or "none" in low, para


def test_the_member_template_parameters_match_the_hub() -> None:
    hub = load_template(TEMPLATE)
    member = load_template(MEMBER_REGION)
    assert member["Parameters"]["EventsTopicName"]["Default"] == hub["Mappings"]["Fixed"]["Settings"]["EventsTopicName"]
    assert "EventsQueueArn" in hub["Outputs"]
    assert copy.deepcopy(member["Parameters"]["LatencyTargetSeconds"]["Default"]) == hub["Parameters"]["LatencyTargetSeconds"]["Default"]


def test_the_docs_and_the_collector_agree_on_the_account_that_holds_s3s_metrics() -> None:
    """Review 19, S1: AWS documents the Region S3 publishes each replication metric in ("Which Region
    is this metric published in?", Using S3 Replication metrics,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/repl-metrics.html), not the account. The
    collector reads them in the source account; DEPLOY.md says the same, and says it is unverified."""
    from replmon.signals.rtc import reader_key

    route = Route.model_validate({"name": "x", "source": {"bucket": "src", "region": TOKYO, "account": "111111111111"},
                                  "destinations": [{"bucket": "dst", "region": SINGAPORE, "rule_id": "r",
                                                    "account": "222222222222"}]})
    assert {reader_key(route, route.destinations[0], m).account for m in METRIC_REGION} == {"111111111111"}
    text = " ".join((ROOT / "docs" / "DEPLOY.md").read_text().split())
    assert "reads all four in the **source bucket's account**" in text and "Not verified on AWS" in text
