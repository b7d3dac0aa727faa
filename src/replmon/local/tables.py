"""Create the latency table exactly as template.yaml defines it (one source of truth)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from replmon.local.template import TEMPLATE, load_template


def ensure_table(client: Any, table: str, template: Path = TEMPLATE) -> None:
    """Create the table and its TTL from template.yaml's LatencyTable, unless it exists."""
    try:
        client.describe_table(TableName=table)
        return
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    props = load_template(template)["Resources"]["LatencyTable"]["Properties"]
    client.create_table(
        TableName=table,
        KeySchema=props["KeySchema"],
        AttributeDefinitions=props["AttributeDefinitions"],
        BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"),
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    client.update_time_to_live(TableName=table, TimeToLiveSpecification=props["TimeToLiveSpecification"])
