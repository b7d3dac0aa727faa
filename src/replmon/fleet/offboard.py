"""Taking replmon off a bucket: its entries out of the bucket's notification and lifecycle
configurations, everything else kept exactly as it was.

S3's PutBucketNotificationConfiguration and PutBucketLifecycleConfiguration *replace* the whole
configuration (docs/REFERENCES.md), so removing our entries means writing
back the rest. replmon's entries are the ones whose ``Id``/``ID`` starts with ``replmon`` (the
names docs/DEPLOY.md gives them) or, for notifications, whose target is one of the stack's own
queues or topics.

>>> cfg = {"QueueConfigurations": [{"Id": "replmon-events", "QueueArn": "arn:q", "Events": ["s3:Replication:*"]},
...                                {"Id": "audit", "QueueArn": "arn:audit", "Events": ["s3:ObjectCreated:*"]}]}
>>> kept, gone = notification_without(cfg)
>>> [c["Id"] for c in kept["QueueConfigurations"]], gone
(['audit'], ['QueueConfigurations replmon-events -> arn:q'])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PREFIX = "replmon"
#: The notification configuration's target lists and the key naming each entry's target.
TARGETS = {"QueueConfigurations": "QueueArn", "TopicConfigurations": "TopicArn", "LambdaFunctionConfigurations": "LambdaFunctionArn"}


def ours(entry_id: str | None) -> bool:
    return bool(entry_id) and str(entry_id).lower().startswith(PREFIX)


def notification_without(config: Mapping[str, Any], targets: Iterable[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """The notification configuration without replmon's entries (by Id, or by target ARN), and
    one line per entry removed. Keys S3 returns that are not configuration (ResponseMetadata)
    are dropped; EventBridgeConfiguration and every other entry are kept as they were."""
    arns = set(targets)
    kept: dict[str, Any] = {}
    removed: list[str] = []
    for key, value in config.items():
        if key == "ResponseMetadata":
            continue
        if key not in TARGETS:
            kept[key] = value
            continue
        stay = []
        for entry in value:
            if ours(entry.get("Id")) or entry.get(TARGETS[key]) in arns:
                removed.append(f"{key} {entry.get('Id', '(no id)')} -> {entry.get(TARGETS[key])}")
            else:
                stay.append(entry)
        if stay:
            kept[key] = stay
    return kept, removed


def lifecycle_without(rules: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The lifecycle rules without replmon's (by ID), and the IDs removed."""
    kept, removed = [], []
    for rule in rules:
        if ours(rule.get("ID")):
            removed.append(str(rule["ID"]))
        else:
            kept.append(dict(rule))
    return kept, removed
