"""The mount stack's contracts with AWS, played once under moto (fio really runs): the runner with
the EFS task definition's environment, IngestFioResults with six runs (a baseline, then a
regression), a truncated and a failed result set, and FioTaskStopped with ECS's STOPPED events.
Every AWS call each part made is recorded and evaluated against its role in
templates/mount-baselines.yaml (@cloud-copilot/iam-simulate); every alarm on replmon's namespace
is checked against the EMF really printed; the dead-letter alarms watch the queues the schedules,
the rule and the function really send to."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest

from tests.cfnutil import ACCOUNT, REGION
from tests.iam import CallRecorder, IamRequest, evaluate
from tests.mountstack import (
    RESULTS_BUCKET,
    TABLE,
    container_env,
    function_env,
    function_role,
    mount_cfn,
    mount_resolver,
    role_policies,
    template,
    transformed,
)

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is installed by `make lab-deps` (apt); make test installs it")
EFS_ID = "fs-0e0e0e0e0e0e0e0e0"
#: The runner's scale here, added to presets.SCALES (where load_targets and expand look scales up)
#: while the module's one run plays: the smallest burst-write the preset allows, each writer's file
#: one 1 MiB block and the runtime at presets.MIN_RUNTIME_SECONDS (2 s of 32 O_DIRECT writers: ~5 GB
#: written on this host, where "tiny" ran 7 s and wrote ~16 GB). What is checked here is the AWS
#: calls, the EMF and the ingestion of the run's outputs, none of which depends on how long fio ran.
SCALE, SCALE_FACTOR = "smallest", 2**-20
CLUSTER = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/replmon-mounts-FioCluster"


@dataclass
class MountRun:
    recorder: CallRecorder
    emf: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    runner_exit: int = -1
    task_id: str = ""
    ingest: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    stopped: dict[str, dict[str, Any]] = field(default_factory=dict)  # event name -> handler result
    run_doc: dict[str, Any] = field(default_factory=dict)


def emf_blobs(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{") and '"_aws"' in line]


def ecs_event(task_id: str, stop_code: str, exit_code: int | None, reason: str = "Essential container in task exited") -> dict[str, Any]:
    """An "ECS Task State Change" event for a STOPPED runner task (ECS developer guide, "Amazon ECS task state change events")."""
    containers = [{"name": "fio", "lastStatus": "STOPPED", **({"exitCode": exit_code} if exit_code is not None else {})}]
    return {"version": "0", "id": f"ev-{task_id}-{stop_code}", "detail-type": "ECS Task State Change", "source": "aws.ecs",
            "account": ACCOUNT, "region": REGION, "resources": [f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/replmon-mounts-FioCluster/{task_id}"],
            "detail": {"clusterArn": CLUSTER, "lastStatus": "STOPPED", "desiredStatus": "STOPPED", "stopCode": stop_code,
                       "stoppedReason": reason, "taskArn": f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/replmon-mounts-FioCluster/{task_id}",
                       "taskDefinitionArn": f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/replmon-mounts-FioEc2TaskDefinition:3",
                       "containers": containers}}


def s3_created(key: str) -> dict[str, Any]:
    return {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": REGION, "eventTime": "2026-11-22T14:00:00.000Z",
                         "eventName": "ObjectCreated:Put", "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": RESULTS_BUCKET,
                                                                                                           "arn": f"arn:aws:s3:::{RESULTS_BUCKET}"},
                                                                  "object": {"key": key, "size": 1, "sequencer": "00"}}}]}


def sqs_message(n: int, body: Any) -> dict[str, Any]:
    return {"messageId": f"m{n}", "receiptHandle": f"h{n}", "body": json.dumps(body), "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:q",
            "awsRegion": REGION}


def play(tmp: str) -> MountRun:
    import boto3

    from replmon import wiring
    from replmon.core.keys import new_run_id
    from replmon.local.aslrun import LambdaContext, load_handler
    from replmon.mounts import runner

    cfn, r = mount_cfn(), mount_resolver()
    roles = {"Runner": role_policies(cfn, "FioTaskRole", r),
             **{fn: role_policies(cfn, function_role(cfn, fn), r) for fn in ("IngestFioResults", "FioTaskStopped")}}
    run = MountRun(CallRecorder(ACCOUNT))
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=RESULTS_BUCKET)
    ddb = boto3.client("dynamodb", region_name=REGION)
    props = template()["Resources"]["FioTable"]["Properties"]
    ddb.create_table(TableName=TABLE, KeySchema=props["KeySchema"], AttributeDefinitions=props["AttributeDefinitions"],
                     BillingMode="PAY_PER_REQUEST")
    # EFS's own series for the run window, as EFS publishes them (AWS/EFS, FileSystemId, bytes per minute).
    from datetime import UTC, datetime

    cw = boto3.client("cloudwatch", region_name=REGION)
    now = time.time()
    cw.put_metric_data(Namespace="AWS/EFS", MetricData=[
        {"MetricName": m, "Dimensions": [{"Name": "FileSystemId", "Value": EFS_ID}], "Timestamp": datetime.fromtimestamp(now + 60 * i, UTC),
         "Value": 600e6 * 60, "Unit": "Bytes"} for m in ("DataReadIOBytes", "DataWriteIOBytes") for i in range(-2, 4)])
    env_base = {"AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"}

    @contextlib.contextmanager
    def as_function(name: str, env: dict[str, str]) -> Iterator[io.StringIO]:
        out = io.StringIO()
        full = {**env_base, **env, "AWS_LAMBDA_FUNCTION_NAME": name}
        with mock.patch.dict(os.environ, full, clear=True), contextlib.redirect_stdout(out), run.recorder.function(name), \
                wiring.injected({name: wiring.from_env(full)} if "REPLMON_TABLE" in env else {}):  # a function's wiring from its template environment
            try:
                yield out
            finally:
                run.emf += [(name, b) for b in emf_blobs(out.getvalue())]

    with run.recorder.recording():
        # The runner, with the environment the EFS task definition gives it (its mount point a directory here).
        task_env = container_env(cfn, "FioEfsTaskDefinition", r)
        targets = json.loads(task_env["REPLMON_FIO_TARGETS"])
        targets[0].update(mount_point=tmp, preset="burst-write")
        task_env.update(REPLMON_FIO_TARGETS=json.dumps(targets), REPLMON_FIO_SCALE=SCALE)
        with mock.patch.object(runner, "METRICS_SETTLE_S", 0), as_function("Runner", task_env) as out:
            run.runner_exit = runner.main()
        summary = json.loads(out.getvalue().splitlines()[-1]) if out.getvalue().strip() else {}
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=RESULTS_BUCKET)["Contents"]]
        task_key = next(k for k in keys if "/tasks/" in k)
        run.task_id = task_key.rsplit("/", 1)[-1].removesuffix(".json")
        base = next(k for k in keys if k.endswith("/run.json")).removesuffix("run.json")
        first = json.loads(s3.get_object(Bucket=RESULTS_BUCKET, Key=base + "run.json")["Body"].read())
        run.run_doc = first
        assert summary.get("status") == "ok", summary
        # IngestFioResults: five more runs of those outputs a day apart (the last one halved), a truncated run.json, a failed run.
        msgs = [base + "run.json"]
        for n in range(1, 6):
            doc = dict(first, run_id=new_run_id(first["start"] + n * 86_400), start=first["start"] + n * 86_400, end=first["end"] + n * 86_400)
            if n == 5:
                doc["knees"] = copy.deepcopy(first["knees"])
                for d in doc["knees"].values():
                    if d.get("knee"):
                        d["knee"]["sustained"] /= 2
            prefix = base.replace(first["run_id"], doc["run_id"])
            for name in doc["fio_outputs"]:
                fio = json.loads(s3.get_object(Bucket=RESULTS_BUCKET, Key=base + name)["Body"].read())
                if n == 5:
                    for job in fio["jobs"]:
                        for d in ("read", "write"):
                            job[d]["bw_bytes"] //= 2
                            job[d]["bw"] //= 2
                s3.put_object(Bucket=RESULTS_BUCKET, Key=prefix + name, Body=json.dumps(fio).encode())
            s3.put_object(Bucket=RESULTS_BUCKET, Key=prefix + "run.json", Body=json.dumps(doc).encode())
            msgs.append(prefix + "run.json")
        truncated = base.replace(first["run_id"], "truncated") + "run.json"
        s3.put_object(Bucket=RESULTS_BUCKET, Key=truncated, Body=b'{"run_id": "x", "pre')
        msgs.append(truncated)
        failed = dict(first, run_id=new_run_id(first["start"] + 7 * 86_400), start=first["start"] + 7 * 86_400,
                      end=first["end"] + 7 * 86_400, status="failed", errors=["fio/01-ior-write.json: not valid JSON: truncated?"])
        prefix = base.replace(first["run_id"], failed["run_id"])
        for name in failed["fio_outputs"]:
            text = s3.get_object(Bucket=RESULTS_BUCKET, Key=base + name)["Body"].read()
            s3.put_object(Bucket=RESULTS_BUCKET, Key=prefix + name, Body=text[: len(text) // 2])
        s3.put_object(Bucket=RESULTS_BUCKET, Key=prefix + "run.json", Body=json.dumps(failed).encode())
        msgs.append(prefix + "run.json")
        batch = {"Records": [sqs_message(i, s3_created(k)) for i, k in enumerate(msgs)]}
        with as_function("IngestFioResults", function_env(cfn, "IngestFioResults", r)):
            run.ingest = load_handler("IngestFioResults")(batch, LambdaContext("IngestFioResults"))
        # FioTaskStopped: ECS's STOPPED events.
        events = {"never-started": ecs_event("t-nostart", "TaskFailedToStart", None, "RESOURCE:MEMORY"),
                  "oom-killed": ecs_event("t-oom", "EssentialContainerExited", 137),
                  "oom-killed-again": ecs_event("t-oom", "EssentialContainerExited", 137),
                  "stopped-by-user": ecs_event("t-user", "UserInitiated", None, "Task stopped by user"),
                  "reported-ok": ecs_event(run.task_id, "EssentialContainerExited", 0)}
        for name, ev in events.items():
            with as_function("FioTaskStopped", function_env(cfn, "FioTaskStopped", r)):
                run.stopped[name] = load_handler("FioTaskStopped")(ev, LambdaContext("FioTaskStopped"))
    from replmon.adapters.dynamodb import DynamoLatencyStore

    run.items = DynamoLatencyStore(TABLE, ddb).partition_items(f"fio#efs#burst-write#{SCALE}")
    run.recorder.policies = roles  # type: ignore[attr-defined]
    return run


@pytest.fixture(scope="module")
def mount_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MountRun]:
    from moto import mock_aws

    from replmon.mounts import presets

    tmp = str(tmp_path_factory.mktemp("efs"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(presets.SCALES, SCALE, SCALE_FACTOR)
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
            mp.setenv(k, v)
        with mock_aws():
            yield play(tmp)


# ------------------------------------------------------------------------------------ IAM
def test_every_recorded_call_is_allowed_by_its_role(mount_run: MountRun) -> None:
    """The runner's calls (results upload, the file system's CloudWatch metrics) under FioTaskRole,
    each function's under its own role. FioTaskStopped lists the task summary's key rather than
    HEADing it: a HEAD of a missing key answers 403 without bucket-wide s3:ListBucket (S3
    HeadObject API reference, "Permissions"); a listing needs ListBucket on that prefix only."""
    reqs = mount_run.recorder.requests()
    assert {fn for fn, _ in reqs} == {"Runner", "IngestFioResults", "FioTaskStopped"}
    assert {r.action for _, r in reqs} >= {"s3:PutObject", "cloudwatch:GetMetricData", "s3:GetObject", "dynamodb:Query", "dynamodb:PutItem"}
    assert evaluate(reqs, mount_run.recorder.policies, ACCOUNT) == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(("role", "needle"), [("Runner", "cloudwatch:GetMetricData"), ("FioTaskStopped", "s3:ListBucket"),
                                              ("IngestFioResults", "dynamodb:Query")])
def test_removing_a_statement_makes_the_check_fail(mount_run: MountRun, role: str, needle: str) -> None:
    policies = copy.deepcopy(mount_run.recorder.policies)  # type: ignore[attr-defined]
    for p in policies[role]:
        p["policy"]["Statement"] = [s for s in p["policy"]["Statement"] if needle not in json.dumps(s.get("Action"))]
    assert any(needle in d for d in evaluate(mount_run.recorder.requests(), policies, ACCOUNT))


def test_task_stopped_may_list_only_the_task_summaries() -> None:
    cfn, r = mount_cfn(), mount_resolver()
    policies = {"F": role_policies(cfn, function_role(cfn, "FioTaskStopped"), r)}
    bucket = f"arn:aws:s3:::{RESULTS_BUCKET}"
    assert evaluate([("F", IamRequest("s3:ListBucket", bucket, (("s3:prefix", "fio-results/tasks/x.json"),)))], policies, ACCOUNT) == []
    assert len(evaluate([("F", IamRequest("s3:ListBucket", bucket, (("s3:prefix", ""),))),
                         ("F", IamRequest("s3:ListBucket", bucket, (("s3:prefix", "fio-results/efs/"),))),
                         ("F", IamRequest("s3:GetObject", f"{bucket}/fio-results/tasks/x.json"))], policies, ACCOUNT)) == 3


# ------------------------------------------------------------------------------------ what was stored and counted
def test_the_runner_ran_the_efs_task_definitions_target_and_kept_the_file_systems_series(mount_run: MountRun) -> None:
    doc = mount_run.run_doc
    assert mount_run.runner_exit == 0 and doc["status"] == "ok" and doc["target"]["file_system_id"] == EFS_ID
    svc = doc["service_metrics"]
    assert svc["namespace"] == "AWS/EFS" and svc["period_s"] == 60
    assert {v for pts in svc["series"].values() for _, v in pts} == {600e6}  # Sum of a minute / 60 s = bytes/s


def test_ingestion_judges_sustained_level_and_burst_duration_and_rejects_a_truncated_result(mount_run: MountRun) -> None:
    rows = [i for i in mount_run.items if i.get("row")]
    runs = {i["run_id"]: i for i in mount_run.items if i["at"].endswith("#run")}
    assert len(runs) == 7 and len(rows) == 6  # six good runs of the one job; nothing of the truncated or unreadable one
    ordered = sorted(rows, key=lambda i: i["start"])
    assert [i["verdict"] for i in ordered] == ["no-baseline"] * 5 + ["regression"]
    judged = set(ordered[-1]["verdicts"])
    knee = mount_run.run_doc["knees"].get("write", {}).get("knee")
    # A burst preset is judged on its sustained level (and burst duration when a knee was found), never on the run's average.
    assert "bw_bytes" not in judged and "sustained_bytes" in judged and ("burst_s" in judged) == bool(knee)
    assert ordered[-1]["verdicts"]["sustained_bytes"]["verdict"] == "regression"
    assert json.loads(runs[ordered[0]["run_id"]]["service"])["summary"], (mount_run.run_doc.get("service_metrics"), mount_run.run_doc.get("service_metrics_error"), mount_run.run_doc["start"], mount_run.run_doc["end"])
    assert [f["itemIdentifier"] for f in mount_run.ingest["batchItemFailures"]] == ["m6"]


def test_a_task_that_never_reported_counts_once_in_fio_run_failed(mount_run: MountRun) -> None:
    s = mount_run.stopped
    assert [s[k]["counted"] for k in ("never-started", "oom-killed", "oom-killed-again", "stopped-by-user", "reported-ok")] == [1, 1, 0, 1, 0]
    assert "never started" in s["never-started"]["reason"] and "137" in s["oom-killed"]["reason"]
    failed = [b for fn, b in mount_run.emf if fn == "FioTaskStopped" and b["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "FioRunFailed"]
    per_task = [b for b in failed if "Target" in b]  # telemetry emits FioRunFailed per target and preset, and with service alone
    assert len(per_task) == 3 and len(failed) == 6 and {b["Target"] for b in per_task} == {"task:replmon-mounts-FioEc2TaskDefinition"}


# ------------------------------------------------------------------------------------ alarms
def test_every_replmon_alarm_of_the_mount_stack_watches_an_emitted_metric(mount_run: MountRun) -> None:
    """CloudWatch matches a metric by namespace, name and the exact dimension set; Powertools adds
    ``service`` (POWERTOOLS_SERVICE_NAME). FioRunFailed comes from the runner and FioTaskStopped,
    FioRegression from IngestFioResults, each with the environment the mount template gives it."""
    from tests.test_alarm_contract import emitted

    seen = emitted(mount_run)  # type: ignore[arg-type]
    cfn, r = mount_cfn(), mount_resolver()
    ns = template()["Mappings"]["Telemetry"]["Metrics"]["Namespace"]
    checked = []
    for name, res in cfn["Resources"].items():
        if res["Type"] == "AWS::CloudWatch::Alarm" and r.exists(name):
            p = r.resolve(res["Properties"])
            if p["Namespace"] == ns:
                checked.append(name)
                assert (ns, p["MetricName"], frozenset((d["Name"], str(d["Value"])) for d in p["Dimensions"])) in seen, name
    assert sorted(checked) == ["FioRegressionAlarm", "FioRunFailedAlarm"]
    by = {fn for fn, b in mount_run.emf if b["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == "FioRunFailed"}
    assert by == {"Runner", "FioTaskStopped"}


def test_every_mount_metric_telemetry_names_is_emitted_with_its_dimension_sets(mount_run: MountRun) -> None:
    from replmon.core import telemetry
    from tests.test_alarm_contract import emitted

    seen = {(m, frozenset(d for d, _ in dims)) for _, m, dims in emitted(mount_run)}  # type: ignore[arg-type]
    fio = [s for s in telemetry.METRICS.values() if s.name.startswith("Fio")]
    assert len(fio) >= 6
    for spec in fio:
        for ds in spec.dimension_sets:
            assert (spec.name, frozenset(ds)) in seen, f"{spec.name} {ds} never emitted"


def test_dead_letter_alarms_watch_the_queues_the_schedules_the_rule_and_the_function_send_to() -> None:
    """EventBridge Scheduler sends a target it could not invoke to the schedule's DeadLetterConfig
    queue; an EventBridge rule target's undeliverable events go to its DeadLetterConfig; an
    asynchronously invoked function's failed events to its DeadLetterQueue. Each queue has an
    alarm on ApproximateNumberOfMessagesVisible (AWS/SQS, QueueName)."""
    t = template()["Resources"]

    def att(node: Any) -> str:  # !GetAtt Q.Arn loads as "Q.Arn"; the long form as [Q, Arn]
        v = node["Fn::GetAtt"]
        return v if isinstance(v, str) else ".".join(v)

    def alarmed(queue: str) -> bool:
        return any(v["Type"] == "AWS::CloudWatch::Alarm" and v["Properties"]["Namespace"] == "AWS/SQS"
                   and att(v["Properties"]["Dimensions"][0]["Value"]) == f"{queue}.QueueName" for v in t.values())

    for sched in ("FioEfsSchedule", "FioEc2Schedule"):
        assert att(t[sched]["Properties"]["Target"]["DeadLetterConfig"]["Arn"]) == "FioSchedulerDeadLetterQueue.Arn"
    [target] = t["FioTaskStoppedRule"]["Properties"]["Targets"]
    assert att(target["DeadLetterConfig"]["Arn"]) == "FioTaskEventsDeadLetterQueue.Arn"
    assert att(t["FioTaskStoppedFunction"]["Properties"]["DeadLetterQueue"]["TargetArn"]) == "FioTaskEventsDeadLetterQueue.Arn"
    for q in ("FioSchedulerDeadLetterQueue", "FioTaskEventsDeadLetterQueue", "FioResultsDeadLetterQueue"):
        assert alarmed(q), q


def test_the_rule_matches_ecs_stopped_events_of_this_cluster_only() -> None:
    """ECS sends "ECS Task State Change" from source aws.ecs with detail.clusterArn and
    detail.lastStatus (ECS developer guide, "Amazon ECS task state change events"); the rule's
    pattern selects this cluster's STOPPED tasks, and EventBridge may invoke the function only from it."""
    cfn, r = mount_cfn(), mount_resolver()
    pattern = r.resolve(cfn["Resources"]["FioTaskStoppedRule"]["Properties"]["EventPattern"])
    ev = ecs_event("t1", "TaskFailedToStart", None)

    def matches(p: Any, e: Any) -> bool:
        return all(matches(v, e.get(k, {})) if isinstance(v, dict) else e.get(k) in v for k, v in p.items())

    assert matches(pattern, ev)
    assert not matches(pattern, {**ev, "detail": {**ev["detail"], "lastStatus": "RUNNING"}})
    assert not matches(pattern, {**ev, "detail": {**ev["detail"], "clusterArn": CLUSTER.replace("FioCluster", "other")}})
    perm = r.resolve(cfn["Resources"]["FioTaskStoppedPermission"]["Properties"])
    assert perm["Principal"] == "events.amazonaws.com" and perm["SourceArn"] == r.get_att("FioTaskStoppedRule", "Arn")


def test_alarm_topic_can_be_published_to_and_no_fixed_names() -> None:
    """The SNS key policy lets CloudWatch use the key (SNS developer guide, "Enable compatibility
    between event sources from AWS services and encrypted topics"); no physical name that would
    collide with a second stack."""
    from tests.test_alarm_contract import alarm_topics, fixed_names, topic_problems

    cfn = mount_cfn()
    assert alarm_topics(cfn) == {"AlarmTopic"} and topic_problems(cfn) == []
    assert fixed_names(cfn) == []
    broken = template()
    broken["Resources"]["AlarmTopic"]["Properties"]["KmsMasterKeyId"] = "alias/aws/sns"
    assert topic_problems(transformed(broken))
