"""The events queue as AWS documents it: S3 may send to it, Lambda's poller may read it, and a bad
record fails only its own message.

- S3 publishes to an SQS queue only if the queue's policy lets ``s3.amazonaws.com`` call
  ``sqs:SendMessage`` (S3 user guide, "Granting permissions to publish event notification messages
  to a destination"), with ``aws:SourceArn`` (the bucket) and ``aws:SourceAccount`` in the request.
- S3 cannot send to a queue encrypted with the AWS managed key ``alias/aws/sqs`` (its key policy
  cannot grant S3); SSE-SQS (SQS-managed keys) or a customer managed key that grants S3 works.
- Lambda's SQS event source reads with the function's role: ``sqs:ReceiveMessage``,
  ``sqs:DeleteMessage``, ``sqs:GetQueueAttributes`` (Lambda developer guide, "Using Lambda with
  Amazon SQS"); a partial batch response is honoured only with
  ``FunctionResponseTypes: [ReportBatchItemFailures]``; the queue's visibility timeout should be at
  least six times the function's timeout.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from replmon.local.template import load_template
from tests.cfnutil import ACCOUNT, MODES, REGION, default_transformed, function_role_policies, resolver, transformed
from tests.conftest import DST, SRC, TEMPLATE
from tests.iam import simulate

FOREIGN = "999988887777"


def send_checks(cfn: dict[str, Any], mode: str) -> dict[str, str]:
    """(label -> result) of S3 sending to the events queue for each bucket, and from a foreign account."""
    r = resolver(cfn, mode)
    queue = r.resolve({"Fn::GetAtt": ["EventsQueue", "Arn"]})
    policy = r.resolve(cfn["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"])
    cases = {f"{b} ({ACCOUNT})": (b, ACCOUNT) for b in (SRC, DST)} | {f"other-bucket ({FOREIGN})": ("other-bucket", FOREIGN)}
    batch = [{"id": label, "principal": "s3.amazonaws.com", "action": "sqs:SendMessage", "resource": queue, "accountId": ACCOUNT,
              "context": {"aws:SourceArn": f"arn:aws:s3:::{bucket}", "aws:SourceAccount": account}, "resourcePolicy": policy}
             for label, (bucket, account) in cases.items()]
    return {k: v["result"] for k, v in simulate(batch).items()}


@pytest.mark.parametrize("mode", list(MODES))
def test_s3_may_send_events_from_the_routes_buckets_and_no_other_account(mode: str) -> None:
    got = send_checks(default_transformed(), mode)
    assert got[f"{SRC} ({ACCOUNT})"] == got[f"{DST} ({ACCOUNT})"] == "Allowed", got
    assert got[f"other-bucket ({FOREIGN})"] != "Allowed", got


def test_the_send_check_fails_without_the_queue_policy_statement() -> None:
    t = copy.deepcopy(load_template(TEMPLATE))
    t["Resources"]["EventsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Principal"] = {"Service": "sns.amazonaws.com"}
    assert set(send_checks(transformed(t), "existing").values()) != {"Allowed"}


def test_the_events_queues_use_keys_s3_can_use() -> None:
    res = load_template(TEMPLATE)["Resources"]
    for name in ("EventsQueue", "EventsDeadLetterQueue"):
        p = res[name]["Properties"]
        assert p.get("SqsManagedSseEnabled") is True and "KmsMasterKeyId" not in p, name


def test_lambdas_poller_may_read_the_queue_and_honours_partial_failures() -> None:
    cfn = default_transformed()
    r = resolver(cfn)
    queue = r.resolve({"Fn::GetAtt": ["EventsQueue", "Arn"]})
    policies = function_role_policies(cfn, "IngestEvents", r)
    actions = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
    got = simulate([{"id": a, "principal": f"arn:aws:iam::{ACCOUNT}:role/IngestEventsRole", "action": a, "resource": queue,
                     "accountId": ACCOUNT, "context": {}, "identityPolicies": policies} for a in actions])
    assert {a: got[a]["result"] for a in actions} == dict.fromkeys(actions, "Allowed")
    other = simulate([{"id": "x", "principal": f"arn:aws:iam::{ACCOUNT}:role/IngestEventsRole", "action": "sqs:ReceiveMessage",
                       "resource": f"arn:aws:sqs:{REGION}:{ACCOUNT}:someone-elses-queue", "accountId": ACCOUNT, "context": {},
                       "identityPolicies": policies}])
    assert other["x"]["result"] != "Allowed"  # this queue only
    t = load_template(TEMPLATE)["Resources"]
    mapping = t["IngestEventsMapping"]["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # "when you set BatchSize to a value greater than 10, you must set MaximumBatchingWindowInSeconds to at least 1"
    assert mapping["BatchSize"] <= 10 or mapping["MaximumBatchingWindowInSeconds"] >= 1
    assert r.resolve(mapping["EventSourceArn"]) == queue
    timeout = t["IngestEventsFunction"]["Properties"].get("Timeout", load_template(TEMPLATE)["Globals"]["Function"]["Timeout"])
    assert t["EventsQueue"]["Properties"]["VisibilityTimeout"] >= 6 * timeout
    redrive = t["EventsQueue"]["Properties"]["RedrivePolicy"]
    assert r.resolve(redrive["deadLetterTargetArn"]) == r.resolve({"Fn::GetAtt": ["EventsDeadLetterQueue", "Arn"]}) != queue
    assert redrive["maxReceiveCount"] >= 1
