"""One run of the real state machine through every path a deployed stack can take, recorded.

Each handler runs with the environment template.yaml gives its function (Globals + its own),
its AWS calls recorded (tests/iam.py) and its stdout (the EMF Powertools prints) captured. The
contract tests then check the recorded calls against each function's role and the alarms
against the metrics really emitted.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import boto3

from replmon import wiring
from replmon.adapters.cloudwatch import CloudWatchReader
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.executions import StepFunctionsExecutions
from replmon.adapters.leases import DynamoLeases
from replmon.adapters.metrics import EmfMetrics
from replmon.adapters.registry_table import DynamoRegistry
from replmon.adapters.spool import SqsSpool
from replmon.core.clock import ManualClock
from replmon.core.record import ProbeRecord
from replmon.local.aslrun import FUNCTIONS as STATE_MACHINE_FUNCTIONS
from replmon.local.aslrun import LambdaContext, LocalStateMachine, load_handler, state_machine_handlers
from replmon.local.tables import ensure_table
from replmon.probe.housekeeping import SWEEP_AGE_SECONDS
from replmon.probe.upload import UploadSettings
from replmon.wiring import Deps
from tests.cfnutil import (
    ACCOUNT,
    REGION,
    SPOOL_QUEUE,
    STACK,
    default_transformed,
    function_environment,
    function_role_policies,
    resolver,
)
from tests.conftest import DST, SRC, TABLE, TEMPLATE, make_buckets, route
from tests.fakes import FakeReplication, Scenario
from tests.iam import CallRecorder, evaluate

MiB = 2**20
#: Every function of the stack: the state machine's, and the passive side's (SQS- and schedule-driven).
PASSIVE_FUNCTIONS = ("IngestEvents", "CollectSignals", "Report", "Heartbeat")  # the mount stack's: tests/test_mounts_contract.py
FUNCTIONS = (*STATE_MACHINE_FUNCTIONS, *PASSIVE_FUNCTIONS)
EVENTS_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "events" / "s3"
SMALL = UploadSettings(multipart_threshold=8 * MiB, compose_threshold=24 * MiB, part_size=5 * MiB, seed_part_size=8 * MiB, workers=2)


class StoreOutage:
    """While ``puts`` > 0, each write of a record (its TransactWriteItems, signals/rollup.py
    ``store_record``) fails the way an unavailable DynamoDB answers (the call is made, and
    recorded, against the real table)."""

    def __init__(self, client: Any) -> None:
        self.puts = 0
        client.meta.events.register("before-call.dynamodb.TransactWriteItems", self._fail)

    def _fail(self, params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params.get("body") or b"{}")  # before-call: the serialized request
        first = (body.get("TransactItems") or [{}])[0].get("Put", {})
        if "#" in first.get("Item", {}).get("route", {}).get("S", "#"):
            return  # not a record's transaction (events' counters): the outage is the record's
        if self.puts > 0:
            self.puts -= 1
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "emulated outage"}}, "TransactWriteItems")


@dataclass
class ContractRun:
    recorder: CallRecorder
    emf: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (function, EMF blob)
    outputs: dict[str, Any] = field(default_factory=dict)  # scenario -> execution result
    records: list[ProbeRecord] = field(default_factory=list)
    swept_late_replica: bool = False
    ingest_response: dict[str, Any] = field(default_factory=dict)
    narrowed: tuple[ProbeRecord, ProbeRecord] | None = None  # (before, after) a replica event
    health: dict[str, Any] = field(default_factory=dict)
    health_without_rtc: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)  # the Report function, per route and {"fleet": true}
    fleet_report: dict[str, Any] = field(default_factory=dict)
    caps_plan: dict[str, Any] = field(default_factory=dict)  # PlanProbes' fleet plan with a route over max_routes
    stack_route: dict[str, Any] = field(default_factory=dict)  # CloudFormation's answer to the StackRoute custom resource
    heartbeats: list[str] = field(default_factory=list)  # the Heartbeat's transitions over the scenario
    event_first_run_ids: dict[str, str] = field(default_factory=dict)
    health_sparse: dict[str, Any] = field(default_factory=dict)  # CollectSignals with a failing and a silent route
    invalid_plan: dict[str, Any] = field(default_factory=dict)  # PlanProbes' output with an invalid registry item


def emf_blobs(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and '"_aws"' in line:
            out.append(json.loads(line))
    return out


def run_contract_scenarios() -> ContractRun:
    """Needs an active mock_aws. Plays every path: each outcome, spool and replay, a lost
    record, a failed cleanup, and the sweep of a STUCK probe's late replica."""
    cfn, r = default_transformed(), resolver(default_transformed())
    policies = {fn: function_role_policies(cfn, fn, r) for fn in FUNCTIONS}
    envs = {fn: {**function_environment(cfn, fn, r), "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                 "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_LAMBDA_FUNCTION_NAME": fn,
                 "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"} for fn in FUNCTIONS}
    # May each function list each bucket? (S3 answers a HEAD of a missing key with 403 if not.)
    from tests.iam import IamRequest

    probes = [(fn, IamRequest("s3:ListBucket", f"arn:aws:s3:::{b}")) for fn in FUNCTIONS for b in (SRC, DST)]
    denied = set(evaluate(probes, policies, ACCOUNT))
    allowed = {(fn, req.resource.rsplit(":", 1)[-1]) for fn, req in probes
               if not any(d.startswith(f"{fn}: s3:ListBucket on {req.resource} ") for d in denied)}
    recorder = CallRecorder(ACCOUNT, lambda fn, bucket: (fn, bucket) in allowed)
    run = ContractRun(recorder)

    # The clock starts about two days from now (probe keys and moto's own upload times compare
    # sensibly), placed so that the collector runs (after the sweep's SWEEP_AGE_SECONDS + 1 h step)
    # 10 min into an hour 0 mod 6: an hour that emits ErrorBudgetRemaining (signals/health.py
    # budget_hour), whatever hour the suite runs in.
    from replmon.signals.health import BUDGET_EVERY_HOURS

    every = BUDGET_EVERY_HOURS * 3600
    clock = ManualClock(start=(time.time() // every + 48 * 3600 // every) * every + 600 - (SWEEP_AGE_SECONDS + 3600) % every, tick=0.001)
    s3 = make_buckets()
    ddb = boto3.client("dynamodb", region_name=REGION)
    ensure_table(ddb, TABLE, TEMPLATE)
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName=SPOOL_QUEUE)["QueueUrl"]
    quarantine_url = sqs.create_queue(QueueName=f"{SPOOL_QUEUE}-quarantine")["QueueUrl"]
    fake = FakeReplication(clock, SRC, DST)
    store = DynamoLatencyStore(TABLE, ddb)
    outage = StoreOutage(ddb)
    deps = Deps(stores=fake.stores(), store=store, metrics=EmfMetrics(), clock=clock, upload=SMALL,
                spool=SqsSpool(queue_url, sqs, quarantine_url), leases=DynamoLeases(TABLE, ddb),
                executions=StepFunctionsExecutions(boto3.client("stepfunctions", region_name=REGION)))

    lock = threading.Lock()

    def wrap(name: str, handler: Callable[[dict[str, Any], Any], Any]) -> Callable[[dict[str, Any], Any], Any]:
        def run_one(event: dict[str, Any], context: Any) -> Any:
            out = io.StringIO()
            with lock, mock.patch.dict(os.environ, envs[name], clear=True), contextlib.redirect_stdout(out), recorder.function(name):
                try:
                    return handler(event, context)
                finally:
                    run.emf += [(name, b) for b in emf_blobs(out.getvalue())]

        return run_one

    handlers = {name: wrap(name, h) for name, h in state_machine_handlers().items()}
    base = {"routes": [route()], "poll": {"use_history": False}, "max_concurrency": 1}
    deps.registry = DynamoRegistry(TABLE, ddb)  # the one list of routes every function reads
    run.stack_route = write_stack_route(cfn, r, deps)

    with wiring.injected(deps), recorder.recording(), LocalStateMachine(handlers, clock=clock) as sm:
        def play(name: str, payload: dict[str, Any]) -> None:
            result = sm.run({**base, **payload}, timeout=120)
            assert result.status == "SUCCEEDED", (name, result.error, result.cause)
            run.outputs[name] = result

        # Every outcome; put, multipart and composition from a seed; the route's history.
        fake.by_size = {1 * MiB: Scenario(3.0), 12 * MiB: Scenario(20.0), 40 * MiB: Scenario(30.0)}
        play("completed", {"sizes": "1MiB,12MiB,40MiB", "trials": 2, "poll": {"use_history": True}})
        fake.by_size = {1 * MiB: Scenario(2.0, outcome="FAILED")}
        play("failed", {"sizes": "1MiB"})
        fake.by_size = {1 * MiB: Scenario(None)}
        play("stuck", {"sizes": "1MiB", "timeout_seconds": 60})
        fake.fail_puts = 1  # the upload fails (not a throttle): the probe is an ERROR, recorded
        play("error", {"sizes": "1MiB"})
        fake.fail_parts = 1  # a part fails mid-upload: the multipart upload is aborted, the probe an ERROR
        play("upload-aborted", {"sizes": "12MiB"})
        # The uploader dies without aborting (a Lambda timeout): Cleanup finds and aborts the upload.
        fake.fail_parts, fake.fail_aborts = 1, 1
        play("upload-orphaned", {"sizes": "12MiB"})
        # COMPLETED at the source but no replica: a HEAD of a missing key (403 without ListBucket).
        fake.by_size, fake.lose_replicas = {1 * MiB: Scenario(2.0)}, True
        play("replica-missing", {"sizes": "1MiB"})
        fake.lose_replicas = False
        # The store is down when RecordResult writes: the record is spooled, and replayed by
        # this run's Housekeeping (the store is back by then).
        # A spooled message that is no record stands before it: quarantined with its reason, the rest replayed.
        outage.puts = 1
        sqs.send_message(QueueUrl=queue_url, MessageBody='{"not": "a record"}')
        play("spooled", {"sizes": "1MiB"})
        # Store and spool both down: the record is lost, and counted.
        outage.puts = 1000
        sqs.delete_queue(QueueUrl=queue_url)
        play("lost", {"sizes": "1MiB"})
        outage.puts = 0
        sqs.create_queue(QueueName=SPOOL_QUEUE)
        # A destination outage during Cleanup: the probe's replica stays, counted.
        fake.fail_deletes = 2
        play("cleanup-failed", {"sizes": "1MiB"})
        # A day later: the STUCK probe's replica arrived late, and a multipart upload was left
        # behind; the next run's Housekeeping sweeps both, and the failed cleanup's leftovers.
        stuck_key = next(i.event["upload"]["key"] for i in run.outputs["stuck"].invocations if i.function == "Cleanup")
        fake.raw.put_object(Bucket=DST, Key=stuck_key, Body=b"late replica")
        fake.raw.create_multipart_upload(Bucket=SRC, Key=stuck_key + "-orphan")
        clock.advance(SWEEP_AGE_SECONDS + 3600)
        play("sweep", {"sizes": "1MiB"})
        left = [v["Key"] for v in s3.list_object_versions(Bucket=DST, Prefix=stuck_key).get("Versions", [])]
        uploads = s3.list_multipart_uploads(Bucket=SRC, Prefix="replmon-probes/").get("Uploads", [])
        run.swept_late_replica = not left and not uploads

        # The route's previous run still holds its lease (a run outlasting its schedule): this run
        # skips the route, recorded and counted (RunSkipped); once that lease is back, runs go on. (A run
        # id, not an execution ARN: nothing tells whether it ended, so its unexpired lease stands; an
        # execution that can never run again (SUCCEEDED, or not redrivable) would not block, fleet/lease.py holder_ended.)
        other = DynamoLeases(TABLE, ddb)
        assert other.acquire("primary", "20261123T100000Z-still-running", clock.now(), clock.now() + 3600, {}) is not None
        play("skipped", {"sizes": "1MiB"})
        assert other.release("primary", "20261123T100000Z-still-running", clock.now())
        # An expired lease of another run of this stack's state machine: BeginRouteRun asks Step
        # Functions whether that run still runs (DescribeExecution: it does not exist) and takes it.
        gone = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{STACK}-replication-probe:gone"
        assert other.acquire("primary", gone, clock.now() - 7200, clock.now() - 3600, {}) is not None
        play("overran-ended", {"sizes": "1MiB"})
        assert run.outputs["overran-ended"].output["skipped"] == []

        play_passive(run, deps, clock, wrap, store, sm, fake, outage)
        play_heartbeat(run, deps, clock, wrap, fake)
        play_caps(run, deps, wrap)

    run.records = store.query("primary", 0, 4e9)
    return run


def sqs_message(n: int, body: Any) -> dict[str, Any]:
    return {"messageId": f"m{n}", "receiptHandle": f"h{n}", "body": body if isinstance(body, str) else json.dumps(body),
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "md5OfBody": "",
            "eventSource": "aws:sqs", "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:events", "awsRegion": REGION}


def write_stack_route(cfn: dict[str, Any], r: Any, deps: Deps) -> dict[str, Any]:
    """The stack's own route into the registry: the StackRoute custom resource as CloudFormation sends
    it to its ServiceToken (the Inventory handler, with its environment), the template's properties
    resolved; the response CloudFormation would read is returned."""
    from replmon.fleet import stack_route

    props = r.resolve(cfn["Resources"]["StackRoute"]["Properties"])
    event = {"RequestType": "Create", "ResponseURL": "https://cloudformation-custom-resource-response.example/r",
             "StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/1", "RequestId": "create-1",
             "LogicalResourceId": "StackRoute", "ResourceType": "Custom::StackRoute", "ResourceProperties": props}
    answers: list[dict[str, Any]] = []
    env = {**function_environment(cfn, "Inventory", r), "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
           "AWS_LAMBDA_FUNCTION_NAME": "Inventory", "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"}
    with mock.patch.dict(os.environ, env), mock.patch.object(stack_route, "_put_response", lambda _url, body: answers.append(body)), \
            wiring.injected({"Inventory": deps}), contextlib.redirect_stdout(io.StringIO()):
        load_handler("Inventory")(event, LambdaContext("Inventory"))
    (answer,) = answers
    assert answer["Status"] == "SUCCESS", answer
    return answer


def play_passive(run: ContractRun, deps: Deps, clock: ManualClock, wrap: Any, store: DynamoLatencyStore, sm: Any, fake: Any,
                 outage: StoreOutage) -> None:
    """S3 events through IngestEvents (a batch with a poison message; a replica's ObjectCreated for
    a stored probe), then CollectSignals with RTC metrics in (moto's) CloudWatch."""
    from replmon.core.keys import iso_ms, new_run_id, probe_object_key

    reader = CloudWatchReader(boto3.client("cloudwatch", region_name=REGION))
    deps.metric_readers = lambda key: reader  # one Region: the route's pair is same-Region

    # A replica's event before its probe's record: RecordResult narrows the record as it stores it;
    # when the store is down then, Housekeeping does it as it replays the spooled record.
    # (The fake replicates 1 MiB in 3.0 s after the PUT, which ends a few clock ticks after now.)
    deps.event_skew = 0.05
    for name, down in (("event-first", 0), ("event-first-spooled", 1)):
        run_id = new_run_id(clock.now())
        early = json.loads((EVENTS_DIR / "replica_created.json").read_text())
        early["Records"][0]["s3"]["object"]["key"] = probe_object_key("replmon-probes/", run_id, "primary", f"{run_id}-primary-1MiB-t1")
        early["Records"][0]["eventTime"] = iso_ms(clock.now() + 3.0)
        wrap("IngestEvents", load_handler("IngestEvents"))({"Records": [sqs_message(0, early)]}, LambdaContext("IngestEvents"))
        fake.by_size = {1 * MiB: Scenario(3.0)}
        outage.puts = down
        result = sm.run({"routes": [route()], "poll": {"use_history": False}, "max_concurrency": 1, "sizes": "1MiB", "run_id": run_id}, timeout=120)
        assert result.status == "SUCCEEDED", (result.error, result.cause)
        run.outputs[name] = result
        run.event_first_run_ids[name] = run_id
        clock.advance(1.0)  # the next run id is a different second
    deps.event_skew = 0.001  # one process, one (manual) clock: the allowance covers ms rounding only
    target = max((r for r in store.query("primary", 0, 4e9) if r.status.name == "COMPLETED"), key=lambda r: r.width or 0)
    key = probe_object_key("replmon-probes/", target.run_id, target.route, target.probe_id)
    assert target.put_end is not None and target.latency_lo is not None
    assert target.latency_hi is not None and target.latency_hi - target.latency_lo > 0.01
    created = target.put_end + (target.latency_lo + target.latency_hi) / 2  # inside the poll's interval
    replica = json.loads((EVENTS_DIR / "replica_created.json").read_text())
    replica["Records"][0]["s3"]["object"]["key"] = key
    replica["Records"][0]["eventTime"] = iso_ms(created)
    # A replica event that contradicts another probe's poll by 10 s: the poll stands, counted.
    other = next(r for r in store.query("primary", 0, 4e9) if r.status.name == "COMPLETED" and r.probe_id != target.probe_id)
    assert other.put_end is not None and other.latency_hi is not None
    late = json.loads((EVENTS_DIR / "replica_created.json").read_text())
    late["Records"][0]["s3"]["object"]["key"] = probe_object_key("replmon-probes/", other.run_id, other.route, other.probe_id)
    late["Records"][0]["eventTime"] = iso_ms(other.put_end + other.latency_hi + 10)
    batch = {"Records": [sqs_message(6, late), sqs_message(1, json.loads((EVENTS_DIR / "replication_failed.json").read_text())),
                         sqs_message(2, "{not json"),
                         sqs_message(3, json.loads((EVENTS_DIR / "replication_missed_threshold.json").read_text())),
                         sqs_message(4, replica),
                         sqs_message(5, json.loads((EVENTS_DIR / "test_event.json").read_text())),
                         sqs_message(7, json.loads((EVENTS_DIR / "replication_after_threshold.json").read_text())),
                         sqs_message(8, odd_replication_time()), sqs_message(9, unmapped_failure())]}
    ingest = wrap("IngestEvents", load_handler("IngestEvents"))
    run.ingest_response = ingest(batch, LambdaContext("IngestEvents"))
    after = store.get_record(target.route, target.sort_key)
    assert after is not None
    run.narrowed = (target, after)
    # RTC metrics as S3 publishes them (AWS/S3, per rule and destination); moto stores what is put.
    from datetime import UTC, datetime

    cw = boto3.client("cloudwatch", region_name=REGION)
    dims = [{"Name": "SourceBucket", "Value": SRC}, {"Name": "DestinationBucket", "Value": DST}, {"Name": "RuleId", "Value": "replmon-probes"}]
    at = datetime.fromtimestamp(clock.now() - 120, UTC)
    cw.put_metric_data(Namespace="AWS/S3", MetricData=[
        {"MetricName": "ReplicationLatency", "Dimensions": dims, "Timestamp": at, "Value": 42.0, "Unit": "Seconds"},
        {"MetricName": "BytesPendingReplication", "Dimensions": dims, "Timestamp": at, "Value": 2.0 * 2**30, "Unit": "Bytes"},
        {"MetricName": "OperationsPendingReplication", "Dimensions": dims, "Timestamp": at, "Value": 7.0, "Unit": "Count"}])
    collect = wrap("CollectSignals", load_handler("CollectSignals"))
    run.health = collect({}, LambdaContext("CollectSignals"))
    # CloudWatch unavailable: the route is still evaluated from probes and events, the failure counted.
    def down(**_: Any) -> None:
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "emulated outage"}}, "GetMetricData")

    reader.client.meta.events.register("before-call.cloudwatch.GetMetricData", down)
    run.health_without_rtc = collect({}, LambdaContext("CollectSignals"))
    play_sparse_signals(run, deps, clock, store, collect)
    # The Report function reads what CollectSignals reads, per route and (fleet) per registry route.
    report = wrap("Report", load_handler("Report"))
    run.report = report({}, LambdaContext("Report"))
    run.fleet_report = report({"fleet": True}, LambdaContext("Report"))
    # A registry item that is not a valid route (written around `fleet put`): the scheduled plan skips
    # it, counted per item (InvalidRoute{RouteGroup, Route, Reason}), and plans the rest.
    from replmon.adapters.registry_table import to_attrs

    store.client.put_item(TableName=TABLE, Item=to_attrs({"route": "#routes/g00", "at": "old..name", "name": "old..name",
                                                          "group": "g00", "origin": "explicit"}))
    run.invalid_plan = wrap("PlanProbes", load_handler("PlanProbes"))({}, LambdaContext("PlanProbes"))
    store.client.delete_item(TableName=TABLE, Key={"route": {"S": "#routes/g00"}, "at": {"S": "old..name"}})


def play_sparse_signals(run: ContractRun, deps: Deps, clock: ManualClock, store: DynamoLatencyStore, collect: Any) -> None:
    """The signals CollectSignals emits only when non-zero (signals/health.py publish_health): a probe-mode
    route whose probes keep FAILING (RpoUnbounded, both burn pairs) and one without any data
    (RouteNoData); then both leave the registry."""
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.core.registry import load_route_spec
    from replmon.signals.rollup import store_record

    assert deps.registry is not None
    for name in ("failing", "silent"):
        deps.registry.put_explicit(load_route_spec({
            "name": name, "group": "g00", "origin": "explicit", "source": {"account": ACCOUNT, "region": REGION, "bucket": SRC},
            "destinations": [{"account": ACCOUNT, "region": REGION, "bucket": DST}]}), None)
    now = clock.now()
    for i in range(6):  # more bad samples than SloMinBadEvents in the last 5 minutes
        at = now - 240 + 30 * i
        run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at)) + "-f"
        store_record(store, ProbeRecord(route="failing", probe_id=f"{run_id}-failing-1MiB-t1", run_id=run_id, planned_at=at,
                                        size_bytes=MiB, size_class="1MiB", trial=1, status=ProbeStatus.FAILED, put_end=at + 1,
                                        target_seconds=deps.slo.threshold_seconds), now, threshold_seconds=deps.slo.threshold_seconds)
    run.health_sparse = collect({}, LambdaContext("CollectSignals"))
    for name in ("failing", "silent"):
        deps.registry.delete_route("g00", name)


def play_heartbeat(run: ContractRun, deps: Deps, clock: ManualClock, wrap: Any, fake: Any) -> None:
    """The Heartbeat function over the stack's route, a minute apart: healthy, a stall (replication
    stops: STALLED, the evidence published to the ticket topic, where a pager does not ring: RouteStalled's
    contributor is the page), healed (recovered, published)."""
    from replmon.adapters.notify import SnsNotifier
    from replmon.core.fleetconfig import load_fleet_settings

    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name=f"{STACK}-TicketTopic")["TopicArn"]
    env = function_environment(default_transformed(), "Heartbeat", resolver(default_transformed()))
    deps.fleet = load_fleet_settings(json.loads(env["REPLMON_FLEET"]))
    deps.notifier = SnsNotifier(env["REPLMON_EVIDENCE_TOPIC_ARN"], sns)
    assert env["REPLMON_EVIDENCE_TOPIC_ARN"] == topic
    beat = wrap("Heartbeat", load_handler("Heartbeat"))
    for latency, minutes in ((2.0, 2), (None, 3), (2.0, 4)):
        fake.by_size = {1024: Scenario(latency)}
        for _ in range(minutes):
            clock.advance(60 - clock.now() % 60 + 0.5)
            out = beat({"group": "g00"}, LambdaContext("Heartbeat"))
            run.heartbeats += out["routes"][0]["transitions"]


def play_caps(run: ContractRun, deps: Deps, wrap: Any) -> None:
    """PlanProbes' scheduled fleet plan ({}) over two registry routes with REPLMON_FLEET max_routes 1:
    one is left out (RoutesOverCap) and, on the default classes, the other's target is lowered
    (SloUnsupported). Last: the Heartbeat above must not see these routes."""
    from replmon.core.fleetconfig import load_fleet_settings
    from replmon.core.registry import load_route_spec

    assert deps.registry is not None
    for name in ("capped-a", "capped-b"):
        deps.registry.put_explicit(load_route_spec({
            "name": name, "group": "g00", "origin": "explicit", "source": {"account": ACCOUNT, "region": REGION, "bucket": SRC},
            "destinations": [{"account": ACCOUNT, "region": REGION, "bucket": DST}]}), None)
    env = function_environment(default_transformed(), "PlanProbes", resolver(default_transformed()))
    deps.fleet = load_fleet_settings({**json.loads(env["REPLMON_FLEET"]), "max_routes": 1})
    run.caps_plan = wrap("PlanProbes", load_handler("PlanProbes"))({}, LambdaContext("PlanProbes"))
    for name in ("capped-a", "capped-b"):
        deps.registry.delete_route("g00", name)
def unmapped_failure() -> dict[str, Any]:
    """A failure event from a bucket no registry route has: kept under #unmapped/<day> and counted
    as UnmappedEvent{Reason}, never filed under a route."""
    doc = json.loads((EVENTS_DIR / "replication_failed.json").read_text())
    doc["Records"][0]["s3"]["bucket"].update({"name": "not-a-route", "arn": "arn:aws:s3:::not-a-route"})
    return dict(doc)


def odd_replication_time() -> dict[str, Any]:
    """An OperationMissedThreshold whose replicationTime is not ISO-8601 (AWS documents no format for
    it): stored all the same, the field kept as sent and flagged (EventsFlagged)."""
    doc = json.loads((EVENTS_DIR / "replication_missed_threshold.json").read_text())
    doc["Records"][0]["replicationEventData"]["replicationTime"] = "2026/11/22 10:03:10"
    return dict(doc)

