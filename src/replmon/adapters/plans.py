"""The plan bucket (core/ports.py :class:`PlanStore`): a tick's probe items as one JSON array, the
``InputType JSON`` the state machine's ``ItemReader`` (``arn:aws:states:::s3:getObject``) reads.

Server-side encryption is the bucket's default (template.yaml ``PlanBucket``); the object's key is
fixed by the plan (core/keys.py ``plan_object_key``), so a retried write replaces it with the same
content. The lifecycle rule of the bucket expires plans after a week.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from replmon.core.errors import StoreUnavailable
from replmon.core.ports import PlanRef


class S3Plans:
    """:class:`~replmon.core.ports.PlanStore` on ``bucket`` (``client`` from adapters/clients.py)."""

    def __init__(self, bucket: str, client: Any) -> None:
        self.bucket = bucket
        self.client = client

    def put_plan(self, key: str, items: Sequence[Mapping[str, Any]]) -> PlanRef:
        body = json.dumps(list(items), separators=(",", ":")).encode()
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable(f"plan bucket {self.bucket}: PutObject {key}: {exc}") from exc
        return PlanRef(bucket=self.bucket, key=key, items=len(items))

    def get_plan(self, key: str) -> list[dict[str, Any]]:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable(f"plan bucket {self.bucket}: GetObject {key}: {exc}") from exc
        items = json.loads(body)
        if not isinstance(items, list):
            raise ValueError(f"plan {key} is not a JSON array (the ItemReader's InputType JSON)")
        return items
