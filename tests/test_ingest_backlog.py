"""Event ingestion survives a backlog - the consumer's concurrency is capped, so a
backlog waits in SQS instead of throttling the table and filling the DLQ.

AWS contracts encoded here:
- ScalingConfig "(Amazon SQS only) ... MaximumConcurrency Limits the number of concurrent
  instances that the Amazon SQS event source can invoke ... Minimum: 2 Maximum: 1000"
  ("AWS::Lambda::EventSourceMapping ScalingConfig",
  https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-lambda-eventsourcemapping-scalingconfig.html);
  "include the value ReportBatchItemFailures in the FunctionResponseTypes list" and maxReceiveCount
  at least 5 ("Using Lambda with Amazon SQS", https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html).
- "Every partition in a DynamoDB table is designed to deliver a maximum capacity of ...
  1,000 write units per second" ("Best practices for designing and using partition keys effectively",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html):
  the cap keeps the writers of one route's partition key a small, known number.
"""

from __future__ import annotations

from replmon.core.defaults import DEFAULTS
from replmon.local.template import load_template
from tests.cfnutil import default_transformed
from tests.conftest import TEMPLATE


def test_the_event_mapping_caps_its_concurrency_within_what_lambda_accepts() -> None:
    fixed = load_template(TEMPLATE)["Mappings"]["Fixed"]["Settings"]["EventsMaxConcurrency"]
    assert fixed == DEFAULTS.events_max_concurrency == 5
    assert 2 <= fixed <= 1000  # Lambda's documented range
    mapping = default_transformed()["Resources"]["IngestEventsMapping"]["Properties"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": {"Fn::FindInMap": ["Fixed", "Settings", "EventsMaxConcurrency"]}}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_queue_redrives_only_after_lambdas_recommended_receive_count() -> None:
    queue = default_transformed()["Resources"]["EventsQueue"]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] >= 5
