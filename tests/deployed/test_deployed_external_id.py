"""(e) With MemberExternalId set (and the member roles requiring it), every cross-account call
carries it; without it the member role refuses.

AWS: a cross-account AssumeRole needs the caller's identity policy and the role's trust policy; a
trust policy's ``sts:ExternalId`` condition refuses a request without it ("AssumeRole", STS API
reference, https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from replmon.local.stack import HOME, MEMBER_A, MEMBER_B, DeployedStack
from tests.deployed.scenario import ROUTE, deployed, uploads

pytestmark = pytest.mark.deployed
EXTERNAL_ID = "replmon-ext-7f3a"


@pytest.fixture(scope="module")
def stack() -> Iterator[DeployedStack]:
    with deployed(member_external_id=EXTERNAL_ID) as s:
        s.advance(minutes=6)
        yield s


def member_assumes(stack: DeployedStack) -> list[Any]:
    return [c for c in stack.calls if c.operation == "AssumeRole" and c.params["RoleArn"].split(":")[4] in (MEMBER_A, MEMBER_B)]


def test_e_with_an_external_id_every_cross_account_call_carries_it_and_is_allowed(stack: DeployedStack) -> None:
    assumes = member_assumes(stack)
    assert {c.function for c in assumes} >= {"Inventory", "UploadProbe", "PollReplication", "Cleanup", "Housekeeping", "Heartbeat",
                                             "CollectSignals"}
    # CollectSignals reads S3's replication metrics as the member's reader role, every other caller as its prober
    assert {c.params["RoleArn"].split("/")[-1] for c in assumes if c.function == "CollectSignals"} == {"replmon-reader"}
    assert [c for c in assumes if c.params.get("ExternalId") != EXTERNAL_ID] == []
    assert stack.denied() == []
    assert uploads(stack, ROUTE) == 1 and stack.deps("Report").store.query(ROUTE, 0, 4e9)


def test_e_without_the_external_id_the_member_role_refuses(stack: DeployedStack) -> None:
    """The member roles require it (templates/member-account.yaml ExternalId): each member AssumeRole
    the functions made, replayed without it, is refused by the role's trust policy, and let in with
    it (the refusal is the ExternalId's: the caller's role allows the call)."""
    for c in {(c.function, c.params["RoleArn"]): c for c in member_assumes(stack)}.values():
        without = {k: v for k, v in c.params.items() if k != "ExternalId"}
        assert stack._authorize("sts", "AssumeRole", without, HOME, c.principal), (c.function, c.params["RoleArn"])
        assert stack._authorize("sts", "AssumeRole", {**without, "ExternalId": "wrong"}, HOME, c.principal)
        assert stack._authorize("sts", "AssumeRole", {**without, "ExternalId": EXTERNAL_ID}, HOME, c.principal) == []
