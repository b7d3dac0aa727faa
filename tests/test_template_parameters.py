"""The hub's parameters: few, grouped for the console, and impossible combinations refused at deploy.

CloudFormation's contract for ``Rules`` ("AWS rule functions", AWS CloudFormation User Guide,
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/intrinsic-function-reference-rules.html):
"The condition property determines if AWS CloudFormation applies the assertions. If the condition
evaluates to true, CloudFormation evaluates the assertions to verify whether a parameter value is
valid when a provisioned product is created or updated. If a parameter value isn't valid,
CloudFormation doesn't create or update the stack. If the condition evaluates to false,
CloudFormation doesn't check the parameter value". Fn::And takes two to ten conditions. The tests
evaluate each rule that way (the harness's Resolver evaluates Fn::Equals / Not / And / Or as
CloudFormation does) for the parameter values a user gives, over the parameters' defaults.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from replmon.core.errors import ConfigError
from replmon.core.expert import TARGETS, ExpertSettings, load_expert, overlay
from replmon.local.cfn import Resolver
from replmon.local.template import load_template
from tests.conftest import TEMPLATE

T = load_template(TEMPLATE)
RULE_FUNCTIONS = {"Fn::And", "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn", "Fn::Equals", "Fn::If", "Fn::Not",
                  "Fn::Or", "Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll", "Ref"}


def refused(**given: Any) -> list[str]:
    """The rules whose assertions fail for these parameters (the deploy fails with their descriptions)."""
    values = {k: v.get("Default", "") for k, v in T["Parameters"].items()} | given
    r = Resolver(T, values)
    failed = []
    for name, rule in T["Rules"].items():
        if "RuleCondition" in rule and not r.resolve(rule["RuleCondition"]):
            continue
        if not all(r.resolve(a["Assert"]) for a in rule["Assertions"]):
            failed.append(name)
    return failed


def test_at_most_25_parameters_each_in_exactly_one_group_with_a_label() -> None:
    params = set(T["Parameters"])
    assert len(params) <= 25, sorted(params)
    interface = T["Metadata"]["AWS::CloudFormation::Interface"]
    grouped = [p for g in interface["ParameterGroups"] for p in g["Parameters"]]
    assert sorted(grouped) == sorted(params), "every parameter in exactly one group"
    assert len(grouped) == len(set(grouped))
    assert set(interface["ParameterLabels"]) == params
    # The first group is what a user sets first: what to watch.
    assert interface["ParameterGroups"][0]["Parameters"][0] == "BucketMode"
    assert interface["ParameterGroups"][-1]["Parameters"][0] == "ExpertSettings"


def test_the_rules_use_rule_functions_only() -> None:
    def functions(node: Any) -> set[str]:
        if isinstance(node, list):
            return set().union(*(functions(n) for n in node)) if node else set()
        if isinstance(node, dict):
            return set(node) | set().union(*(functions(v) for v in node.values()))
        return set()

    for name, rule in T["Rules"].items():
        used = {f for f in functions(rule) if f.startswith("Fn::") or f == "Ref"}
        assert used <= RULE_FUNCTIONS, (name, used - RULE_FUNCTIONS)
        for a in rule["Assertions"]:
            assert a["AssertDescription"]
            if "Fn::And" in a["Assert"]:
                assert 2 <= len(a["Assert"]["Fn::And"]) <= 10


def test_the_defaults_and_the_three_bucket_modes_deploy() -> None:
    assert refused() == []
    assert refused(BucketMode="existing", SourceBucketName="src", DestinationBucketName="dst", DestinationRegion="us-west-2",
                   ReplicationRuleId="rule-1", SourceKmsKeyArn="arn:aws:kms:us-east-1:123456789012:key/k") == []
    assert refused(BucketMode="none", MemberAccounts="444455556666", RouteGroups="2") == []
    assert refused(ReplicationFaultDrill="ENABLED") == []
    assert refused(DiscoverOrganizationAccounts="true", OrganizationId="o-abcdefghij") == []


@pytest.mark.parametrize(("given", "rule"), [
    ({"BucketMode": "existing"}, "ExistingNeedsBuckets"),
    ({"BucketMode": "existing", "SourceBucketName": "src"}, "ExistingNeedsBuckets"),
    ({"BucketMode": "existing", "DestinationBucketName": "dst"}, "ExistingNeedsBuckets"),
    ({"BucketMode": "create-demo", "SourceBucketName": "src"}, "DemoTakesNoBuckets"),
    ({"BucketMode": "create-demo", "ReplicationRuleId": "rule-1"}, "DemoTakesNoBuckets"),
    ({"BucketMode": "none", "SourceBucketName": "src", "DestinationBucketName": "dst"}, "FleetOnlyTakesNoRoute"),
    ({"BucketMode": "none", "DestinationRoleArn": "arn:aws:iam::210987654321:role/r"}, "FleetOnlyTakesNoRoute"),
    ({"BucketMode": "none", "DestinationRegion": "us-west-2"}, "FleetOnlyTakesNoRoute"),
    ({"BucketMode": "existing", "SourceBucketName": "s", "DestinationBucketName": "d", "ReplicationFaultDrill": "ENABLED"},
     "FaultDrillNeedsDemo"),
    ({"BucketMode": "none", "ReplicationFaultDrill": "ENABLED"}, "FaultDrillNeedsDemo"),
    ({"DiscoverOrganizationAccounts": "true"}, "DiscoveryNeedsOrganization"),
])
def test_an_impossible_combination_fails_the_deploy(given: dict[str, str], rule: str) -> None:
    assert refused(**given) == [rule]
    text = " ".join(a["AssertDescription"] for a in T["Rules"][rule]["Assertions"])
    assert any(name in text for name in given), text  # it names what was wrong


def test_a_fleet_only_hub_has_no_route_of_its_own() -> None:
    """BucketMode none: no demo bucket, no StackRoute item, no route alarm or output, and no function
    policy that names a bucket of its own (the registry's routes go through the member roles)."""
    from tests.cfnutil import transformed

    r = Resolver(T, {"BucketMode": "none"})
    for logical in ("DemoSourceBucket", "DemoDestinationBucket", "DemoReplicationRole", "StackRoute", "PendingBytesAlarm"):
        assert not r.exists(logical), logical
    assert r.exists("InventoryFunction") and r.exists("ProbeStateMachine") and r.exists("EventsQueue")
    assert not r.condition("HasStackRoute")
    assert all(not r.condition(v["Condition"]) for k, v in T["Outputs"].items() if k in ("SourceBucket", "DestinationBucket"))
    cfn = transformed()
    rc = Resolver(cfn, {"BucketMode": "none"}, physical={"LatencyTable": "t"})
    for logical, res in cfn["Resources"].items():
        if res["Type"] != "AWS::IAM::Role":
            continue
        text = json.dumps([rc.resolve(p["PolicyDocument"]) for p in res["Properties"].get("Policies", [])])
        assert "arn:aws:s3:::/" not in text, logical  # no statement on an empty bucket name


def test_expert_settings_default_to_nothing_and_reach_every_function() -> None:
    param = T["Parameters"]["ExpertSettings"]
    assert param["Default"] == "{}" and load_expert(param["Default"]) == ExpertSettings()
    assert T["Globals"]["Function"]["Environment"]["Variables"]["REPLMON_EXPERT"] == {"Ref": "ExpertSettings"}
    for key in ExpertSettings.model_fields:
        assert key in param["Description"], key  # the console lists every key
    assert set(TARGETS) == set(ExpertSettings.model_fields)
    # CloudFormation checks AllowedPattern at deploy (it cannot parse JSON): an object or nothing
    import re

    pattern = re.compile(param["AllowedPattern"])
    assert all(pattern.fullmatch(v) for v in ("{}", '{"trials": 2}', ' { "probe_classes": "1MiB@1h" } '))
    assert not any(pattern.fullmatch(v) for v in ("", "trials=2", "[1]", '"{}"'))


def test_an_expert_knob_reaches_the_reader_it_replaced() -> None:
    """Each moved parameter's value arrives where its reader parses it (wiring.from_env and the inventory)."""
    from replmon.fleet.accounts import load_inventory_settings
    from replmon.wiring import from_env

    expert = {"probe_sizes": "1KiB", "trials": 2, "probe_timeout_seconds": 600, "max_concurrency": 3, "slo_target_percent": 99.5,
              "slo_period_days": 7, "retention_days": 30, "probe_classes": "1MiB@30m", "spread_seconds": 60, "fleet_max_probes": 50,
              "heartbeat_seconds": 30, "fleet_max_routes": 7, "opt_out_tag": "k=v", "inventory_workers": 4, "trace_aws_calls": True}
    env = {"REPLMON_TABLE": "t", "REPLMON_METRICS": "none", "REPLMON_EXPERT": json.dumps(expert),
           "REPLMON_FLEET": json.dumps({"route_groups": 2, "tick_minutes": 15}),
           "REPLMON_SLO": json.dumps({"threshold_seconds": 900, "probe_interval_minutes": 15}),
           "REPLMON_DEFAULTS": json.dumps({"target_seconds": 900}), "REPLMON_INVENTORY": json.dumps({"hub_account": "123456789012"})}
    deps = from_env(env)
    assert deps.defaults == {"target_seconds": 900, "sizes": "1KiB", "trials": 2, "timeout_seconds": 600, "max_concurrency": 3}
    assert (deps.slo.target, deps.slo.period_days, deps.retention_days) == (0.995, 7, 30)
    f = deps.fleet
    assert (f.route_groups, str(f.classes), f.spread_seconds, f.max_probes, f.heartbeat_seconds, f.max_routes) == (2, "1MiB@30m", 60, 50, 30, 7)
    inv = load_inventory_settings(json.loads(overlay(env)["REPLMON_INVENTORY"]))
    assert (inv.opt_out, inv.workers) == (("k", "v"), 4)
    assert overlay(env)["REPLMON_TRACE_AWS_CALLS"] == "true"


@pytest.mark.parametrize(("text", "says"), [
    ('{"trails": 2}', "trails: not an expert setting - the keys are probe_sizes"),
    ('{"trials": 0}', 'trials: Input should be greater than or equal to 1 - set ExpertSettings {"trials": ...}'),
    ('{"fleet_max_probes": 5000}', "fleet_max_probes: Input should be less than or equal to 1000"),
    ('{"opt_out_tag": "nokeyvalue"}', "opt_out_tag: String should match pattern"),
    ("{trials: 2}", "not JSON"),
    ("[1]", "a JSON object is needed"),
])
def test_a_bad_expert_setting_names_the_field_and_the_fix(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_expert(text)
    assert "ExpertSettings" in str(info.value) and says in str(info.value)


def test_a_bad_expert_setting_fails_the_function_that_reads_it() -> None:
    """The deployed path: from_env (every handler's wiring; the StackRoute custom resource answers FAILED with it)."""
    from replmon.wiring import from_env

    with pytest.raises(ConfigError, match=r"spread_seconds \(900\) must be below the ScheduleRateMinutes tick"):
        from_env({"REPLMON_TABLE": "t", "REPLMON_METRICS": "none", "REPLMON_EXPERT": '{"spread_seconds": 900}',
                  "REPLMON_FLEET": '{"tick_minutes": 15}'})
    # a 5-minute tick works with the default spread (half the tick when the default would not fit)
    assert from_env({"REPLMON_TABLE": "t", "REPLMON_METRICS": "none", "REPLMON_FLEET": '{"tick_minutes": 5}'}).fleet.spread_seconds == 150


def test_the_events_queue_admits_every_bucket_of_the_hub_account_in_every_mode() -> None:
    """`replmon fleet enroll` points buckets of the hub's account and Region that the stack does not
    name at EventsQueue; S3 checks the queue policy when the configuration is put and refuses the
    entry if its principal may not send. The queue policy grants the S3 service principal
    sqs:SendMessage, scoped with aws:SourceAccount (AWS, "Granting permissions to publish event
    notification messages to a destination":
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/grant-destinations-permissions-to-s3.html),
    not with the stack's two bucket ARNs, whatever BucketMode is."""
    policy = load_template(TEMPLATE)["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"]
    [s3] = [s for s in policy["Statement"] if isinstance(s, dict) and s.get("Sid") == "S3EventNotifications"]
    assert s3["Principal"] == {"Service": "s3.amazonaws.com"} and s3["Action"] == "sqs:SendMessage"
    assert s3["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_expert_settings_accept_pretty_printed_json_and_refuse_what_is_not_an_object() -> None:
    """CloudFormation matches AllowedPattern against the whole value (Java regex; `.` stops at a
    line break), so a pretty-printed object must still match; a list or a word must not."""
    import re

    pattern = re.compile(T["Parameters"]["ExpertSettings"]["AllowedPattern"])
    pretty = json.dumps({"trials": 2, "probe_sizes": "1MiB"}, indent=2)
    assert "\n" in pretty and pattern.fullmatch(pretty) and pattern.fullmatch("{}")
    assert not pattern.fullmatch("[1, 2]") and not pattern.fullmatch("trials=2")
