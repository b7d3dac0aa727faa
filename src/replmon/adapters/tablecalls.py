"""One DynamoDB call on a named table, its failures in the domain's words: a condition that failed
stays ``ConditionalCheckFailedException`` (callers decide what it means); anything else is
:class:`~replmon.core.errors.StoreUnavailable` (the run leases and the route registry use it)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from replmon.core.errors import StoreUnavailable


def table_call(client: Any, table: str, op: str, **kwargs: Any) -> Any:
    try:
        return getattr(client, op)(TableName=table, **kwargs)
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            raise
        raise StoreUnavailable(f"{table}: {exc.response['Error']['Code']}: {exc}") from exc
    except BotoCoreError as exc:
        raise StoreUnavailable(f"{table}: {type(exc).__name__}: {exc}") from exc
