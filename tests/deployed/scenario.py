"""The fleet every deployed scenario starts from, and what the scenarios read of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replmon.local.stack import AWAY, HOME, MEMBER_A, MEMBER_B, DeployedStack

#: The opt-in tag a member bucket carries to be probed (the tag opt-in lands with; align the value then).
OPT_IN = {"replmon:probe": "on"}
ROUTE, UNTAGGED = "orders-src", "plain-src"
PROBE_FUNCTIONS = ("UploadProbe", "PollReplication", "RecordResult", "Cleanup")


def populate(stack: DeployedStack) -> DeployedStack:
    """A tagged pair in member A (its destination in the other Region) and an untagged pair in member
    B, then one inventory run (as its schedule would)."""
    stack.bucket_pair(MEMBER_A, ROUTE, HOME, MEMBER_A, "orders-dr", AWAY, tags=OPT_IN)
    stack.bucket_pair(MEMBER_B, UNTAGGED, HOME, MEMBER_B, "plain-dr", HOME)
    stack.invoke("Inventory", {})
    return stack


def fleet(stack_factory: Callable[..., DeployedStack], **kwargs: Any) -> DeployedStack:
    return populate(stack_factory(**kwargs))


def uploads(stack: DeployedStack, route: str, since: float = 0.0) -> int:
    """Probes of ``route`` uploaded (UploadProbe invocations) since ``since``."""
    return sum(1 for i in stack.invocations if i.function == "UploadProbe" and i.at >= since and i.event["route"]["name"] == route)
