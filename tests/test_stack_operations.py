"""The stack's smaller operational defects, each against the AWS page it depends on.

- Log retention: "AWS::Logs::LogGroup" (RetentionInDays "Possible values are: 1, 3, 5, 7,
  14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and 3653")
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html,
  and "AWS::Lambda::Function LoggingConfig" ("By default, Lambda functions send logs to a default
  log group named /aws/lambda/<function name>")
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-function-loggingconfig.html.
- Two retry layers: "Invoke a Lambda function on a schedule" ("EventBridge Scheduler
  invokes your Lambda function asynchronously") https://docs.aws.amazon.com/lambda/latest/dg/with-eventbridge-scheduler.html;
  "Asynchronous invocation" (function errors retried "two more times")
  https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html; "AWS::Lambda::EventInvokeConfig"
  (MaximumRetryAttempts 0-2) https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-eventinvokeconfig.html.
- The fault drill's reason: "Amazon S3 replication failure reasons" (DstPutObjectNotPermitted:
  "required permissions (s3:ReplicateObject ...) are missing for the destination bucket")
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-metrics-events.html.
- Transfer priced by the source Region: "AWS Global Network FAQs" ("For DTO and DTIR, we
  charge for data transfer only based on the source Region")
  https://aws.amazon.com/about-aws/global-infrastructure/global-network/faqs.
- BytesPendingReplication: "Using S3 Replication metrics" (Maximum; published in the
  destination Region) https://docs.aws.amazon.com/AmazonS3/latest/userguide/repl-metrics.html.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.sizes import parse_size
from replmon.local.template import load_template
from tests.cfnutil import default_transformed, resolver
from tests.conftest import ROOT, TEMPLATE

RETENTION_VALUES = {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in load_template(TEMPLATE)["Resources"].items() if v["Type"] == kind}


def test_every_function_has_a_declared_log_group_with_a_retention_cloudformation_accepts() -> None:
    """Lambda writes to /aws/lambda/<function name> unless LoggingConfig.LogGroup names another
    group; custom names must not begin with aws/ ("Configuring CloudWatch log groups",
    https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-loggroups.html;
    AWS::Lambda::Function LoggingConfig). Each function logs to a group this stack declares, with
    a retention, under a name Lambda never creates by itself: a stack that already ran has
    /aws/lambda/<function>, and declaring that name again fails the update (AlreadyExists)."""
    t = load_template(TEMPLATE)
    groups = resources("AWS::Logs::LogGroup")
    for fn, spec in resources("AWS::Serverless::Function").items():
        ref = spec["Properties"].get("LoggingConfig", {}).get("LogGroup")
        assert isinstance(ref, dict) and ref.get("Ref") in groups, f"{fn}: LoggingConfig.LogGroup must !Ref a declared log group"
        group = groups[ref["Ref"]]["Properties"]
        name = group["LogGroupName"]["Fn::Sub"]
        assert name.startswith("/replmon/${AWS::StackName}/") and not name.lstrip("/").startswith("aws/"), (fn, name)
        assert "/aws/lambda/" not in name, f"{fn}: {name} is Lambda's default name (AlreadyExists on update)"
        assert group["RetentionInDays"] == {"Fn::FindInMap": ["Fixed", "Settings", "LogRetentionDays"]}, fn
    names = [g["Properties"]["LogGroupName"]["Fn::Sub"] for g in groups.values() if "Fn::Sub" in g["Properties"].get("LogGroupName", {})]
    assert len(names) == len(set(names))
    assert t["Mappings"]["Fixed"]["Settings"]["LogRetentionDays"] in RETENTION_VALUES


def test_scheduled_functions_do_not_stack_lambdas_retries_on_the_schedules() -> None:
    cfn = default_transformed()
    configs = {v["Properties"]["FunctionName"]["Ref"]: v["Properties"] for v in cfn["Resources"].values()
               if v["Type"] == "AWS::Lambda::EventInvokeConfig"}
    scheduled = [k for k, v in load_template(TEMPLATE)["Resources"].items() if v["Type"] == "AWS::Serverless::Function"
                 and any(e["Type"] == "ScheduleV2" for e in v["Properties"].get("Events", {}).values())]
    assert scheduled, "no scheduled function: the check checks nothing"
    for fn in scheduled:
        c = configs.get(fn)
        assert c is not None and c["MaximumRetryAttempts"] == 0, fn
        assert c["DestinationConfig"]["OnFailure"]["Destination"], fn  # a failed tick is kept, not dropped
        for e in load_template(TEMPLATE)["Resources"][fn]["Properties"]["Events"].values():
            assert e["Properties"].get("DeadLetterConfig"), fn  # the schedule's own delivery failures too


def test_the_pending_bytes_alarm_clears_one_probe_in_transfer() -> None:
    """The threshold is at least twice the largest default probe, read over RTC's 15 minutes."""
    t = load_template(TEMPLATE)
    largest = max(parse_size(s) for s in DEFAULTS.sizes.split(","))
    assert int(t["Mappings"]["Fixed"]["Settings"]["PendingBytesAlarmBytes"]) >= 2 * largest
    a = t["Resources"]["PendingBytesAlarm"]["Properties"]
    assert a["Statistic"] == "Maximum" and a["Period"] * a["EvaluationPeriods"] >= 900 and a["DatapointsToAlarm"] == a["EvaluationPeriods"]


def test_the_dashboard_shows_the_size_classes_the_runs_use() -> None:
    """No size class is written into the dashboard: a SEARCH over the SizeClass dimension shows
    whatever sizes (or a preset) the runs measure."""
    cfn = default_transformed()
    body = json.loads(resolver(cfn).resolve(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    text = json.dumps(body)
    assert '"SizeClass", "' not in text and not re.search(r'"SizeClass",\s*"\d', text)
    exprs = [row[0]["expression"] for w in body["widgets"] for row in w["properties"].get("metrics", []) if len(row) == 1 and "expression" in row[0]]
    assert any("SizeClass}" in e and 'MetricName="ReplicationLatencySeconds"' in e for e in exprs), exprs


def test_the_role_outputs_deploy_md_promises_exist() -> None:
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    # DestinationRoleArn is a hub parameter, OperatorRoleArn a member-account.yaml parameter: not outputs
    promised = set(re.findall(r"`(\w+RoleArn)`", text)) - {"DestinationRoleArn", "OperatorRoleArn"}
    assert {"PollReplicationRoleArn", "CleanupRoleArn", "HousekeepingRoleArn"} <= promised
    cfn = default_transformed()
    for name in promised:
        att = cfn["Outputs"][name]["Value"]["Fn::GetAtt"]
        role = (att.split(".") if isinstance(att, str) else att)[0]
        fn = name.removesuffix("RoleArn") + "Function"
        assert cfn["Resources"][role]["Type"] == "AWS::IAM::Role", name
        assert cfn["Resources"][fn]["Properties"]["Role"] == {"Fn::GetAtt": [role, "Arn"]}, name  # that function's own role


def test_the_fault_drill_names_the_reason_s3_reports() -> None:
    from replmon.signals.s3events import FAILURE_REASONS

    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    drill = next(p for p in text.split("\n- ") if p.startswith("**Fault drill.**"))
    assert "DstPutObjectNotPermitted" in drill and "DstPutObjectNotPermitted" in FAILURE_REASONS
    assert "AssumeRoleNotPermitted`-class" not in drill
    deny = load_template(TEMPLATE)["Resources"]["DemoReplicationFaultDrill"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert deny["Effect"] == "Deny" and deny["Action"] == ["s3:ReplicateObject"]  # what DstPutObjectNotPermitted names


def test_transfer_is_priced_by_the_source_region_and_says_which() -> None:
    from replmon.cost.estimate import estimate, transfer_rate
    from replmon.probe.request import load_request

    req = load_request({"routes": [{"name": "r", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}],
                        "sizes": "1GiB"})
    tokyo = estimate(req, 30, cross_region=True, rtc=False, source_region="ap-northeast-1")
    virginia = estimate(req, 30, cross_region=True, rtc=False, source_region="us-east-1")
    [t] = [x for x in tokyo.lines if x.item.startswith("S3 inter-region transfer")]
    [v] = [x for x in virginia.lines if x.item.startswith("S3 inter-region transfer")]
    assert "ap-northeast-1" in t.item and "us-east-1" in v.item and t.quantity == v.quantity
    assert t.dollars == pytest.approx(v.dollars * transfer_rate("ap-northeast-1") / transfer_rate("us-east-1")) and t.dollars > 3 * v.dollars
    assert tokyo.transfer_source_region == "ap-northeast-1"
    with pytest.raises(ConfigError, match=r"--source-region: no inter-Region transfer rate for 'eu-south-7'"):
        estimate(req, 30, cross_region=True, rtc=False, source_region="eu-south-7")


def test_replmon_cost_prints_the_rate_it_used() -> None:
    from tests.test_cli import cli

    doc = json.loads(cli("cost", "--cross-region", "--source-region", "ap-northeast-1", "--format", "json").stdout)
    assert doc["transfer_source_region"] == "ap-northeast-1" and doc["transfer_rate_per_gb"] == 0.09
    assert any("from ap-northeast-1" in x["item"] for x in doc["lines"])
    bad = cli("cost", "--cross-region", "--source-region", "eu-south-7")
    assert bad.returncode != 0 and "--source-region" in bad.stderr + bad.stdout

