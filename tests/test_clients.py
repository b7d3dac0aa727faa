"""One retry and timeout policy for every AWS client (src/replmon/adapters/clients.py).

Botocore's behaviour the policy relies on (boto3 developer guide, "Retries",
https://docs.aws.amazon.com/boto3/latest/guide/retries.html): the default retry mode is
*legacy* (5 attempts, fewer errors retried), so every client must ask for *standard* mode;
``total_max_attempts`` counts the initial request (``max_attempts`` does not); standard mode
backs off exponentially (base 2, jittered) up to 20 s between attempts.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from replmon.adapters import clients
from replmon.core.route import Destination
from replmon.probe.plan import CLEANUP_BOUND_SECONDS, RECORD_BOUND_SECONDS
from replmon.probe.request import POLL_TIMEOUT_MARGIN_SECONDS
from tests.conftest import ROOT

PACKAGE = ROOT / "src" / "replmon"
CLIENTS = PACKAGE / "adapters" / "clients.py"


def settings(client: Any) -> tuple[str, int, float, float]:
    cfg = client.meta.config
    return cfg.retries["mode"], cfg.retries["total_max_attempts"], cfg.connect_timeout, cfg.read_timeout


@pytest.mark.parametrize("call", list(clients.POLICY.values()), ids=list(clients.POLICY))
def test_every_call_class_builds_a_standard_mode_client_with_both_timeouts(call: clients.CallClass) -> None:
    c = clients.client("s3", call, region="us-east-1")
    assert settings(c) == ("standard", call.attempts, call.connect_timeout, call.read_timeout)
    assert call.attempts >= 1 and call.connect_timeout > 0 and call.read_timeout > 0 and call.purpose


def test_s3_compatible_endpoints_get_path_style_and_a_region() -> None:
    c = clients.client("s3", clients.CONTROL, endpoint_url="http://127.0.0.1:9000", keys=("k", "s"))
    assert c.meta.config.s3["addressing_style"] == "path" and c.meta.region_name == "us-east-1"
    assert settings(c) == ("standard", 2, 3, 10)


def test_the_adapters_clients_come_from_the_policy() -> None:
    """What the wiring hands the domain: S3 data and control clients, the table's client."""
    from replmon.adapters.s3 import S3Stores
    from replmon.wiring import latency_table

    store = S3Stores(("k", "s"))(Destination(bucket="dst-bucket", endpoint_url="http://127.0.0.1:9"))
    assert settings(store.client) == ("standard", 4, 5, 60) and settings(store.control) == ("standard", 2, 3, 10)
    table = latency_table("t", endpoint_url="http://127.0.0.1:9", call="read")
    assert settings(table.client) == ("standard", 2, 3, 5)  # type: ignore[attr-defined]


def test_the_runs_bounds_cover_the_policy() -> None:
    """probe/plan.py and probe/request.py state their bounds in terms of these call classes."""
    # RecordResult: the store (3 x 13 s), then the spool (3 x 13 s).
    assert 2 * clients.STORE.attempts * clients.STORE.attempt_seconds <= RECORD_BOUND_SECONDS
    # Cleanup: per side, three control calls (list versions, delete, list uploads) of 2 x (3 + 10) s.
    assert 3 * clients.CONTROL.attempts * clients.CONTROL.attempt_seconds <= CLEANUP_BOUND_SECONDS
    # PollReplication keeps room past its inline budget for the final HEAD and a replica's HEAD.
    assert 2 * clients.CONTROL.read_timeout <= POLL_TIMEOUT_MARGIN_SECONDS


def makes_clients(path: Path) -> list[str]:
    """Places in ``path`` that build a botocore Config, a boto3 session or a client."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "botocore.config":
            found.append(f"line {node.lineno}: imports botocore.config")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if node.func.attr == "client" and (owner == "boto3" or "Session(" in owner or owner.endswith("session")):
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
            if node.func.attr == "Session" and owner in ("boto3", "boto3.session"):
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
    return found


def test_no_module_but_clients_builds_a_client() -> None:
    bad = {str(p.relative_to(PACKAGE)): f for p in PACKAGE.rglob("*.py") if p != CLIENTS and (f := makes_clients(p))}
    assert bad == {}


def test_the_scan_bites(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("import boto3\nfrom botocore.config import Config\n"
                   "a = boto3.client('s3')\nb = boto3.session.Session(profile_name='p').client('sqs')\n")
    assert len(makes_clients(src)) == 4
    assert makes_clients(CLIENTS)  # the one module that does
