"""The evidence topic (the ticket topic): SNS Publish (Heartbeat's stall and recovery evidence, probe/heartbeat.py)."""

from __future__ import annotations

from typing import Any


class SnsNotifier:
    """:class:`~replmon.core.ports.Notifier` on an SNS topic. SNS takes a subject of fewer than 100
    printable ASCII characters; the caller keeps it short, this trims it."""

    def __init__(self, topic_arn: str, client: Any) -> None:
        self.topic_arn = topic_arn
        self.client = client

    def publish(self, subject: str, message: str) -> None:
        safe = "".join(c if " " <= c <= "~" else "?" for c in subject)[:99]
        self.client.publish(TopicArn=self.topic_arn, Subject=safe, Message=message)


class MemoryNotifier:
    """For the lab and tests: keeps every message."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []

    def publish(self, subject: str, message: str) -> None:
        self.messages.append((subject, message))
