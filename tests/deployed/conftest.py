"""The deployed stack's scenarios (``pytest -m deployed``): replmon.local.stack with tests/iam.py's
mapping of API calls to IAM actions and its policy evaluator (@cloud-copilot/iam-simulate)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from replmon.local.stack import DeployedStack
from tests.iam import iam_requests, simulate


class TestsAuthorizer:
    """replmon.local.stack.Authorizer from tests/iam.py (its documented mapping, its evaluator)."""

    def requests(self, service: str, operation: str, params: dict[str, Any], region: str, account: str) -> list[Any]:
        return iam_requests(service, operation, params, region, account)

    def simulate(self, batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return simulate(batch)


@pytest.fixture
def stack_factory() -> Iterator[Any]:
    """``stack_factory(**kwargs)`` -> an entered DeployedStack (closed after the test)."""
    stacks: list[DeployedStack] = []

    def make(**kwargs: Any) -> DeployedStack:
        s = DeployedStack(TestsAuthorizer(), **kwargs)
        s.__enter__()
        stacks.append(s)
        return s

    yield make
    for s in reversed(stacks):
        s.__exit__(None, None, None)
