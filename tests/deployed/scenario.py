"""The fleet every deployed scenario starts from, and what the scenarios read of it.

Each scenario module plays one stack (a module-scoped fixture: a stack costs seconds of CPU) and
its tests read what the operator would see at each phase; one module's stack is closed before the
next module's opens (moto and the local state machine are per process)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from replmon.local.stack import AWAY, HOME, MEMBER_A, MEMBER_B, DeployedStack
from tests.iam import iam_requests, simulate

#: The opt-in tag a member bucket carries to be probed (the tag opt-in lands with; align the value then).
OPT_IN = {"replmon:enroll": "true"}  # REPLMON_FLEET enroll_tag (core/fleetconfig.py)
ROUTE, UNTAGGED = "orders-src", "plain-src"
PROBE_FUNCTIONS = ("UploadProbe", "PollReplication", "RecordResult", "Cleanup")


class TestsAuthorizer:
    """replmon.local.stack.Authorizer from tests/iam.py (its documented mapping, its evaluator)."""

    def requests(self, service: str, operation: str, params: dict[str, Any], region: str, account: str) -> list[Any]:
        return iam_requests(service, operation, params, region, account)

    def simulate(self, batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return simulate(batch)


@contextmanager
def deployed(fleet: bool = True, **kwargs: Any) -> Iterator[DeployedStack]:
    """A deployed stack; with ``fleet``, a tagged pair in member A (its destination in the other
    Region) and an untagged pair in member B, then one inventory run (as its schedule would)."""
    with DeployedStack(TestsAuthorizer(), **kwargs) as stack:
        if fleet:
            stack.bucket_pair(MEMBER_A, ROUTE, HOME, MEMBER_A, "orders-dr", AWAY, tags=OPT_IN)
            stack.bucket_pair(MEMBER_B, UNTAGGED, HOME, MEMBER_B, "plain-dr", HOME)
            stack.invoke("Inventory", {})
        yield stack


def uploads(stack: DeployedStack, route: str, since: float = 0.0) -> int:
    """Probes of ``route`` uploaded (UploadProbe invocations) since ``since``."""
    return sum(1 for i in stack.invocations if i.function == "UploadProbe" and i.at >= since and i.event["route"]["name"] == route)


def replmon(stack: DeployedStack, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """``replmon <args>`` as the hub's operator runs it, with the exit code cli/app.py ``main`` gives: a
    command's returned code, or a CliError's (its one line appended to the output), or 5 and the
    traceback of an unexpected error (main's catch-all)."""
    import traceback

    from typer.testing import CliRunner

    from replmon.cli.app import app
    from replmon.cli.common import CliError

    with stack.operator():
        r = CliRunner().invoke(app, list(args), input=stdin, standalone_mode=False)
    if isinstance(r.exception, CliError):
        return r.exception.code, f"{r.output}error: {r.exception}"
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return 5, r.output + "".join(traceback.format_exception(r.exception))
    return (r.return_value if isinstance(r.return_value, int) else r.exit_code), r.output
