"""How every command shows what it found: the consoles (results on stdout, progress and notices
on stderr), the three formats, the probe tables and the progress bar. Commands import this
module and cli/common.py, never each other or the app (cli/app.py assembles them)."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from replmon.core.record import ProbeRecord
from replmon.core.stats import SizeSummary

out = Console(width=None if sys.stdout.isatty() else 220, soft_wrap=False)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_HELP = "table (for people), json (one document on stdout), csv"


def emit(rows: Sequence[Mapping[str, Any]], fmt: Format, title: str = "", columns: Sequence[str] | None = None,
         document: Mapping[str, Any] | None = None) -> None:
    """Rows as a table, a CSV, or one JSON document (``document`` if given, else the rows)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if fmt is Format.json:
        sys.stdout.write(json.dumps(document if document is not None else list(rows), default=str, indent=1) + "\n")
    elif fmt is Format.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r.get(c) is None else r.get(c) for c in columns})
        sys.stdout.write(buf.getvalue())
    else:
        t = Table(title=title or None, title_justify="left")
        for c in columns:
            t.add_column(c, justify="right" if rows and isinstance(rows[0].get(c), int | float) else "left")
        for r in rows:
            t.add_row(*("-" if r.get(c) is None else str(r.get(c)) for c in columns))
        out.print(t)


def progress_bar() -> Progress:
    return Progress(TextColumn("[bold]probes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                    disable=not err.is_terminal and os.environ.get("REPLMON_PROGRESS") != "1")


def _f(x: float | None, spec: str = ".2f") -> str | None:
    return None if x is None else format(x, spec)


def summary_rows(summaries: list[SizeSummary]) -> list[dict[str, Any]]:
    """The table people read: percentiles of the interval midpoints, the widest interval, the
    bound the policy promised and how many probes met it."""
    rows = []
    for s in summaries:
        rows.append({
            "route": s.route, "size": s.size_class, "trials": f"{s.completed}/{s.probes}",
            "p50 s": _f(s.p50), "p90 s": _f(s.p90), "p99 s": _f(s.p99), "max s": _f(s.max),
            "MiB/s": _f(s.mib_per_s, ".1f"), "HEADs/probe": _f(s.heads_per_probe, ".1f"),
            "widest interval s": _f(s.max_width, ".3f"),
            "bound s": None if s.max_bound is None else (f"{s.min_bound:.3f}" if s.min_bound == s.max_bound
                                                         else f"{s.min_bound:.3f}-{s.max_bound:.3f}"),
            "bound met": f"{s.bound_met}/{s.completed}" if s.completed else None,
            "within target": None if s.share_within_target is None else f"{100 * s.share_within_target:.0f} %",
            "failed/stuck/error": f"{s.failed}/{s.stuck}/{s.errors}",
        })
    return rows


def record_rows(records: list[ProbeRecord]) -> list[dict[str, Any]]:
    """One row per probe (CSV and the lab's JSON)."""
    return [{"probe_id": r.probe_id, "size": r.size_class, "trial": r.trial, "status": str(r.status),
             "latency_lo": r.latency_lo, "latency_hi": r.latency_hi, "latency_mid": r.latency_mid, "heads": r.head_count,
             "bound_s": r.bound_seconds, "bound_met": r.bound_met, "within_target": r.within_target,
             "failure_reason": r.failure_reason} for r in records]


def health_row(h: Mapping[str, Any]) -> dict[str, Any]:
    """One route's RPO and SLO (health.RouteHealth.to_json) as a table row."""
    rpo, slo = h["rpo"], h["slo"]
    burn = slo["burn_rates"]

    def pct(v: float | None) -> float | None:
        return None if v is None else round(100 * v, 3)

    return {"route": h["route"], "rpo_s": "unbounded" if rpo["unbounded"] else rpo["seconds"],
            "why": "; ".join(rpo["reasons"]) or "-", "slo_probes": f"{slo['good']}/{slo['total']}",
            "attainment_%": pct(slo["attainment"]), "budget_left_%": pct(slo["budget_left"]),
            "budget_events": slo.get("budget_events"),
            **{f"burn_{slo.get('windows', {}).get(k, k)}": v for k, v in burn.items()},
            "alerts": ",".join(k for k, v in slo["alerts"].items() if v) or "-",
            "pending_bytes": rpo["inputs"].get("rtc_bytes_pending"), "events": sum(h["events"].values()) if isinstance(h["events"], dict) else 0}


def write_data(records: list[ProbeRecord], path: Path) -> Path:
    """The run's records as JSON (the lab keeps one file per run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_item() for r in records], indent=1, default=str))
    return path
