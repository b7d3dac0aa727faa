"""`replmon report --fleet`: every registry route in one table, riskiest first.

One row per route of the registry (every group, every mode): its verdict, RPO now, SLO attainment,
error budget left, the 1 h and 6 h burn rates and its worst size class over the window. The inputs
are what `replmon report` computes per route (signals/health.py, signals/verdict.py, core/stats.py
summaries): the fleet report adds the registry's view (group, mode, reason) and the order.

**Risk order** (the first rows are the ones to look at):

1. RPO unbounded (a probe or event says replication is not happening within anything we can bound);
   then a stalled route (its heartbeats stopped replicating: ``stall_seconds`` > 0, signals/stall.py);
2. breach (RPO over target, a probe FAILED or over target, the page burn alert);
3. a route the registry probes whose state is unknown (not measured, or no data at all);
4. everything else;

then, within a tier, RPO as a share of the target (highest first), the 1 h burn rate, the 6 h burn
rate (highest first) and the budget left (lowest first); the route name breaks ties. Routes the
registry does not probe (passive or off) carry their reason, so a route is never missing silently.

>>> rows = fleet_rows(
...     [{"route": "a", "group": "g00", "mode": "probe", "reason_code": "OK"},
...      {"route": "b", "group": "g00", "mode": "probe", "reason_code": "OK"}],
...     {"a": {"rpo_seconds": 40.0, "rpo_unbounded": False, "slo": {"attainment_percent": 100.0,
...            "budget_left_percent": 100.0, "burn_rates": [{"window": "1h", "rate": 0.0}]}},
...      "b": {"rpo_seconds": None, "rpo_unbounded": True, "slo": {"attainment_percent": 90.0,
...            "budget_left_percent": -20.0, "burn_rates": [{"window": "1h", "rate": 14.4}]}}},
...     {"a": "ok", "b": "breach"}, [], target_seconds=900.0)
>>> [(r["route"], r["verdict"], r["rpo_seconds"]) for r in rows]
[('b', 'breach', 'unbounded'), ('a', 'ok', 40.0)]
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import iso_ms
from replmon.core.ports import LatencyTable, RegistryStore
from replmon.core.registry import MAX_ROUTE_GROUPS, RegistryRead, group_names, read_registry
from replmon.core.stats import summarize
from replmon.probe.latency_report import records_in
from replmon.signals.health import health_output, route_health
from replmon.signals.slo import SloSpec, slo_for_route
from replmon.signals.verdict import judge_health

#: Columns of a fleet row, in order (table, json and csv alike).
COLUMNS = ("route", "group", "mode", "verdict", "rpo_seconds", "stall_seconds", "expect_seconds", "detect_bound_seconds",
           "rpo_share_of_target", "attainment_percent", "budget_left_percent", "burn_1h", "burn_6h", "worst_size_class",
           "worst_max_seconds", "probes", "reason")


def _burn(health: Mapping[str, Any], window: str) -> float | None:
    for b in (health.get("slo") or {}).get("burn_rates", []):
        if b.get("window") == window:
            return None if b.get("rate") is None else float(b["rate"])
    return None


def _worst(mine: Iterable[Mapping[str, Any]]) -> tuple[str | None, float | None, int]:
    """The size class whose slowest completed probe took longest, and the route's probe count
    (``mine``: the route's own size summaries)."""
    mine = list(mine)
    probes = sum(int(s.get("probes") or 0) for s in mine)
    timed = [s for s in mine if s.get("max_seconds") is not None]
    if not timed:
        return None, None, probes
    w = max(timed, key=lambda s: float(s["max_seconds"]))
    return str(w["size_class"]), float(w["max_seconds"]), probes


def risk_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """Sort key: tier (module docstring), then RPO share, burns (descending), budget left (ascending)."""
    if row["rpo_seconds"] == "unbounded":
        tier = 0.0
    elif row.get("stall_seconds"):
        tier = 0.5
    elif row["verdict"] == "breach" or row["mode"] == "invalid" or str(row.get("reason", "")).startswith("READ_FAILED"):
        tier = 1.0  # a route nothing can judge (an invalid item, its reads failing) is looked at with the breaches
    elif row["mode"] == "probe" and row["verdict"] in ("not_measured", "no_data"):
        tier = 2.0
    else:
        tier = 3.0

    def desc(v: Any) -> float:
        return -float(v) if isinstance(v, (int, float)) else 0.0

    budget = row["budget_left_percent"]
    return (tier, desc(row["rpo_share_of_target"]), desc(row["burn_1h"]), desc(row["burn_6h"]),
            float(budget) if isinstance(budget, (int, float)) else float("inf"), row["route"])


def fleet_rows(routes: Sequence[Mapping[str, Any]], health: Mapping[str, Mapping[str, Any]], verdicts: Mapping[str, str],
               summaries: Sequence[Mapping[str, Any]], *, target_seconds: float,
               stalls: Mapping[str, float | None] | None = None) -> list[dict[str, Any]]:
    """One row per registry route (``route``, ``group``, ``mode``, ``reason_code`` [, ``reason``]),
    joined with its health (signals/health.py ``health_output``), verdict, size summaries and
    StallSeconds (``stalls`` per route, else the health's ``stall``; None: no heartbeat state); riskiest first."""
    by_route: dict[str, list[Mapping[str, Any]]] = {}  # one pass over the summaries, not one per route
    for summary in summaries:
        by_route.setdefault(str(summary.get("route")), []).append(summary)
    rows = []
    for r in routes:
        name = str(r["route"])
        h = health.get(name) or {}
        slo = h.get("slo") or {}
        unbounded = bool(h.get("rpo_unbounded"))
        rpo = h.get("rpo_seconds")
        worst, worst_max, probes = _worst(by_route.get(name, []))
        rows.append({
            "route": name, "group": r.get("group"), "mode": r.get("mode"), "verdict": verdicts.get(name, "no_data"),
            "rpo_seconds": "unbounded" if unbounded else rpo,
            "stall_seconds": (stalls or {}).get(name) if stalls is not None else (h.get("stall") or {}).get("seconds"),
            # the route's learned E and the longest a full stall takes to page (signals/stall.py detection_bound)
            "expect_seconds": (h.get("stall") or {}).get("expect_seconds"),
            "detect_bound_seconds": (h.get("stall") or {}).get("detection_bound_seconds"),
            "rpo_share_of_target": None if unbounded or rpo is None else round(float(rpo) / target_seconds, 3),
            "attainment_percent": slo.get("attainment_percent"), "budget_left_percent": slo.get("budget_left_percent"),
            "burn_1h": _burn(h, "1h"), "burn_6h": _burn(h, "6h"), "worst_size_class": worst, "worst_max_seconds": worst_max,
            "probes": probes, "reason": "-" if r.get("reason_code") in (None, "OK") else f"{r['reason_code']}: {r.get('reason', '')}".rstrip(": "),
        })
    return sorted(rows, key=risk_key)


def registry_rows(registry: RegistryStore, read: RegistryRead | None = None) -> list[dict[str, Any]]:
    """Every route of the registry (all groups; ``read``: as already read by :func:`read_registry`) as
    the ``routes`` input of :func:`fleet_rows`; an item that is not a valid route is a row too (mode
    ``invalid``, its reason naming the field and the fix), and a group whose read fails is a row naming
    the group (reason ``READ_FAILED``): nothing is missing silently. Every group failing raises."""
    read = read or read_registry(registry, group_names(MAX_ROUTE_GROUPS))
    rows: list[dict[str, Any]] = [{"route": s.name, "group": s.group, "mode": s.verdict.mode.value,
                                   "reason_code": s.verdict.reason_code.value, "reason": s.verdict.reason} for s in read.routes]
    for b in read.invalid:
        code = "READ_FAILED" if b.reason == "ReadFailed" else f"INVALID_{b.reason}"
        rows.append({"route": b.name, "group": b.group, "mode": "invalid", "reason_code": code, "reason": b.detail})
    return rows


def invalid_verdicts(routes: list[dict[str, Any]]) -> dict[str, str]:
    """The verdict of each row nothing could judge: an invalid item has no data (a configuration to fix,
    exit 4 like a route that is not scheduled); a group whose read failed is not measured (the store
    failed, exit 3). Neither is a breach."""
    return {str(r["route"]): "not_measured" if r["reason_code"] == "READ_FAILED" else "no_data"
            for r in routes if r["mode"] == "invalid"}


def fleet_report(store: LatencyTable, registry: RegistryStore, *, slo: SloSpec, rpo_window_seconds: float, now: float,
                 hours: float = 24.0, fleet: FleetSettings | None = None) -> dict[str, Any]:
    """The Report function's ``{"fleet": true}``: the same rows as ``replmon report --fleet``. A route
    whose reads fail (throttled, denied) is marked (verdict ``unreadable``, the error as its reason);
    the others are reported. With ``fleet``, each route's SLO is the one CollectSignals judges it
    with (signals/slo.py ``slo_for_route``), else ``slo`` for all."""
    read = read_registry(registry, group_names(MAX_ROUTE_GROUPS))  # once: the rows and the SLOs from the same read
    routes = registry_rows(registry, read)
    slos: dict[str, SloSpec | None] = {}
    if fleet is not None:
        for spec in read.routes:
            if spec.group in fleet.groups:
                slos[spec.name] = slo_for_route(spec, fleet, slo) if spec.probing else None
    names = [str(r["route"]) for r in routes if r["mode"] != "invalid"]
    start = now - hours * 3600
    records: list[Any] = []
    raw: dict[str, Any] = {}
    unreadable: dict[str, str] = {}
    for n in names:
        try:
            mine = records_in(store, [n], start, now)
            judged = slos.get(n, slo)
            h = route_health(store, n, now, judged or slo, rpo_window_seconds)
            h.slo_judged = judged is not None
            raw[n] = h.to_json(judged or slo)
        except Exception as exc:  # this route only (throttled, denied): its row says why
            unreadable[n] = f"{type(exc).__name__}: {exc}"
            continue
        records += mine
    health = {n: health_output(h) for n, h in raw.items()}
    verdicts = {n: str(judge_health(raw[n], [r for r in records if r.route == n], target_seconds=slo.threshold_seconds,
                                    rpo_window_seconds=rpo_window_seconds, now=now).verdict) for n in raw}
    # nothing judged them, and the reason says why (mode "invalid", or READ_FAILED: not measured)
    verdicts.update({n: "not_measured" for n in unreadable})
    verdicts.update(invalid_verdicts(routes))
    for r in routes:
        if str(r["route"]) in unreadable:
            r["reason_code"], r["reason"] = "READ_FAILED", unreadable[str(r["route"])]
    summaries = [{"route": s.route, "size_class": s.size_class, "probes": s.probes, "max_seconds": s.max} for s in summarize(records)]
    return {"window": {"start": iso_ms(start), "end": iso_ms(now), "hours": hours}, "generated_at": iso_ms(time.time()),
            "fleet": fleet_rows(routes, health, verdicts, summaries, target_seconds=slo.threshold_seconds)}
