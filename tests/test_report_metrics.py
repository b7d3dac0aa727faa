"""Report statistics and EMF metrics."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.metrics import EmfMetrics
from replmon.core.clock import ManualClock
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.stats import percentile, summarize
from replmon.local.tables import ensure_table
from replmon.probe.steps import report_step
from replmon.wiring import Deps
from tests.conftest import TABLE, TEMPLATE


def rec(size: int, lo: float | None, hi: float | None, status: ProbeStatus = ProbeStatus.COMPLETED, at: float = 1_790_000_000.0,
        probe: str = "p", heads: int = 10) -> ProbeRecord:
    import time

    from replmon.core.keys import RUN_STAMP

    return ProbeRecord(route="primary", probe_id=probe, run_id=time.strftime(RUN_STAMP, time.gmtime(at)) + "-r", planned_at=at, size_bytes=size, size_class=f"{size // 2**20}MiB",
                       trial=1, status=status, latency_lo=lo, latency_hi=hi, head_count=heads, target_seconds=60.0)


def test_percentiles_match_numpy_linear() -> None:
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert (percentile(xs, 0), percentile(xs, 50), percentile(xs, 90), percentile(xs, 100)) == (1.0, 3.0, 4.6, 5.0)
    assert percentile([], 50) is None


def test_summary_per_size_counts_failures_and_share_within_target() -> None:
    mib = 2**20
    recs = [rec(mib, i, i + 1.0, probe=f"a{i}") for i in range(10)]  # mids 0.5 .. 9.5
    recs += [rec(64 * mib, 50, 51, probe="b1"), rec(64 * mib, 70, 71, probe="b2"),
             rec(64 * mib, 10, None, ProbeStatus.STUCK, probe="b3"), rec(64 * mib, 0, None, ProbeStatus.FAILED, probe="b4"),
             rec(64 * mib, None, None, ProbeStatus.ERROR, probe="b5", heads=0)]
    small, big = summarize(recs)
    assert (small.probes, small.completed, small.p50, small.max) == (10, 10, 5.0, 9.5)
    assert small.share_within_target == 1.0 and small.max_width == 1.0
    assert small.p90 == pytest.approx(8.6)
    assert (big.completed, big.failed, big.stuck, big.errors) == (2, 1, 1, 1)
    # Within 60 s: only b1 (hi 51) of the four judged probes (ERROR is not a replication outcome).
    assert big.share_within_target == 0.25
    assert big.mib_per_s == pytest.approx(64 / 60.5)


def test_report_function_queries_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        store = DynamoLatencyStore(TABLE, ddb)
        now = 1_790_000_000.0
        store.put_once(rec(2**20, 1.0, 2.0, at=now - 3600, probe="in"))
        store.put_once(rec(2**20, 1.0, 2.0, at=now - 3 * 86400, probe="old"))
        from replmon.adapters.memregistry import MemoryRegistry
        from replmon.fleet.stack_route import stack_route_spec

        primary = stack_route_spec({"RouteName": "primary", "Account": "123456789012", "Region": "us-east-1",
                                    "SourceBucket": "src", "DestinationBucket": "dst"}, groups=1)
        deps = Deps(stores=lambda e: None, store=store, metrics=None, clock=ManualClock(now),  # type: ignore[arg-type,return-value]
                    registry=MemoryRegistry([primary]))  # no routes asked: the registry's
        out = report_step({"hours": 24}, deps)
        assert out["probes"] == 1 and out["summaries"][0]["p50"] == 1.5
        assert report_step({"hours": 24 * 7}, deps)["probes"] == 2
        with pytest.raises(Exception, match="hours"):
            report_step({"hours": -1}, deps)


def test_emf_output_carries_latency_and_status(capsys: pytest.CaptureFixture[str]) -> None:
    EmfMetrics().publish(rec(2**20, 1.0, 2.0))
    EmfMetrics().publish(rec(2**20, 10.0, None, ProbeStatus.STUCK))
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    def names(b: dict[str, Any]) -> list[str]:
        return [m["Name"] for d in b["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]]
    latency = [b for b in blobs if "ReplicationLatencySeconds" in names(b)]
    assert [b["ReplicationLatencySeconds"] for b in latency] in ([2.0], [[2.0]])  # the upper bound
    # one set: the fleet's (RouteGroup from the route; core/telemetry.py SWITCHED)
    assert [sorted(b["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) for b in latency] == [["Route", "RouteGroup", "SizeClass"]]
    assert latency[0]["RouteGroup"] == "g00"
    completed = next(b for b in blobs if "ProbeCompleted" in names(b))  # group-level: nothing reads it per route
    assert completed["RouteGroup"] == "g00" and "Route" not in completed
    assert next(b for b in blobs if "ProbeStuck" in names(b))["ProbeStuck"] in (1.0, [1.0])
    assert not any("ReplicationLatencySeconds" in names(b) for b in blobs[-1:])


def test_the_report_function_answers_fleet_with_every_registry_route() -> None:
    """`{"fleet": true}`: every registry route, riskiest first, from the same table,
    through the deployed entry point; other keys are refused by name."""
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.core.registry import group_of, load_route_spec
    from replmon.entry.report import report
    from replmon.signals.slo import SloSpec

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        store, registry = DynamoLatencyStore(TABLE, ddb), DynamoRegistry(TABLE, ddb)
        now = 1_790_000_000.0
        store.put_once(rec(2**20, 1.0, 2.0, at=now - 600, probe="ok"))  # route "primary": 2 s against 60 s
        for name in ("primary", "quiet"):
            registry.put_explicit(load_route_spec({
                "name": name, "group": group_of(name, 1), "origin": "explicit",
                "source": {"account": "111122223333", "region": "us-east-1", "bucket": f"{name}-src"},
                "destinations": [{"account": "111122223333", "region": "eu-west-1", "bucket": f"{name}-dst"}]}), None)
        deps = Deps(stores=lambda e: None, store=store, metrics=None, clock=ManualClock(now),  # type: ignore[arg-type,return-value]
                    slo=SloSpec(threshold_seconds=60.0), registry=registry)
        out = report(json.loads((TEMPLATE.parent / "events" / "report_fleet.json").read_text()), deps)  # what sam remote invoke sends
        assert [(r["route"], r["verdict"], r["probes"]) for r in out["fleet"]] == [("quiet", "no_data", 0), ("primary", "ok", 1)]
        assert out["fleet"][1]["worst_size_class"] == "1MiB" and out["fleet"][1]["worst_max_seconds"] == 1.5
        with pytest.raises(ValueError, match="routes"):
            report({"fleet": True, "routes": ["x"]}, deps)
        assert report({"hours": 24, "routes": ["primary"]}, deps)["probes"] == 1  # without "fleet": the per-route report
