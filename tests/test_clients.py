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
from replmon.probe.plan import CLEANUP_BOUND_SECONDS, CLEANUP_SIDE_SECONDS, RECORD_BOUND_SECONDS, RECORD_INVOCATION_SECONDS
from replmon.probe.request import HEAD_WORST_CASE_SECONDS, POLL_TIMEOUT_MARGIN_SECONDS, poll_timeout_margin
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
    """probe/plan.py and probe/request.py state their bounds in terms of these call classes, with
    every attempt timing out and the longest backoff between attempts (worst_case_seconds)."""
    # RecordResult: the store, then the spool, in one invocation; the state machine's retries on top.
    assert 2 * clients.STORE.worst_case_seconds <= RECORD_INVOCATION_SECONDS and 4 * RECORD_INVOCATION_SECONDS < RECORD_BOUND_SECONDS
    # Cleanup: per side, three control calls (list versions, delete, list uploads); two sides.
    assert 3 * clients.CONTROL.worst_case_seconds <= CLEANUP_SIDE_SECONDS and CLEANUP_BOUND_SECONDS >= 2 * CLEANUP_SIDE_SECONDS
    # PollReplication keeps room past its inline budget for the final HEAD and a replica's HEAD.
    assert clients.CONTROL.worst_case_seconds <= HEAD_WORST_CASE_SECONDS
    assert 2 * HEAD_WORST_CASE_SECONDS < POLL_TIMEOUT_MARGIN_SECONDS == poll_timeout_margin(1) < poll_timeout_margin(2)


def test_the_functions_timeouts_hold_their_bounds() -> None:
    """A Lambda function stops at its Timeout (Lambda Developer Guide, "Configure Lambda function
    timeout", https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html): each
    step's worst case must fit in its function's Timeout, or the step ends as a timeout error."""
    from tests.cfnutil import load_template

    props = {n: r["Properties"] for n, r in load_template()["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    assert props["CleanupFunction"]["Timeout"] >= CLEANUP_BOUND_SECONDS
    assert props["RecordResultFunction"]["Timeout"] >= RECORD_INVOCATION_SECONDS
    fixed = load_template()["Mappings"]["Fixed"]["Settings"]["PollFunctionTimeoutSeconds"]
    # The PollReplication timeout still holds a zero inline budget plus the margin.
    assert fixed >= POLL_TIMEOUT_MARGIN_SECONDS


def test_a_budget_that_leaves_no_room_for_the_final_heads_is_refused() -> None:
    from replmon.core.errors import ConfigError
    from replmon.probe.request import load_request

    route = {"name": "r", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst-1"}, {"bucket": "dst-2"}]}
    load_request({"routes": [route], "poll": {"inline_budget_seconds": 120 - poll_timeout_margin(2)}})
    with pytest.raises(ConfigError, match=r"poll\.inline_budget_seconds.*2 destination"):
        load_request({"routes": [route], "poll": {"inline_budget_seconds": 121 - poll_timeout_margin(2)}})


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


#: The deployed-stack harness builds the emulated cloud's own clients (moto's accounts, the operator's
#: view); every function it runs still gets its clients from adapters/clients.py.
HARNESS = PACKAGE / "local" / "stack.py"


def test_no_module_but_clients_builds_a_client() -> None:
    bad = {str(p.relative_to(PACKAGE)): f for p in PACKAGE.rglob("*.py") if p not in (CLIENTS, HARNESS) and (f := makes_clients(p))}
    assert bad == {}


def test_the_scan_bites(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("import boto3\nfrom botocore.config import Config\n"
                   "a = boto3.client('s3')\nb = boto3.session.Session(profile_name='p').client('sqs')\n")
    assert len(makes_clients(src)) == 4
    assert makes_clients(CLIENTS)  # the one module that does


def test_the_assumed_roles_sts_client_is_under_the_policy() -> None:
    """botocore's AssumeRoleCredentialFetcher builds its STS client through the creator it is
    given, with no config of its own: replmon's creator adds the control class."""
    base = clients.session(("AKIDEXAMPLE", "secret"))
    s = clients._assumed_role_session(base, "arn:aws:iam::111122223333:role/replmon-prober", "ap-southeast-1")
    fetcher = s._session._credentials._refresh_using.__self__  # the fetcher the credentials refresh with
    sts = fetcher._create_client()
    assert sts.meta.service_model.service_name == "sts"
    assert settings(sts) == ("standard", 2, 3, 10)


def test_architecture_prints_the_policy_as_the_code_has_it() -> None:
    """docs/ARCHITECTURE.md's client policy table is the POLICY table, row for row."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0].strip("`") in clients.POLICY:
            connect, read = (float(x) for x in cells[1].split("/"))
            rows[cells[0].strip("`")] = (connect, read, int(cells[2]))
    assert rows == {n: (c.connect_timeout, c.read_timeout, c.attempts) for n, c in clients.POLICY.items()}
