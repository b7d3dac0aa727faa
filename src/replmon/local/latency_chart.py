"""The two charts an operator reads.

- :func:`latency_chart`: latency against size, log-log, every trial with its interval as an error
  bar, the target as a line (probes above it in red), next to the published CRR experiment's
  ranges (docs/REFERENCES.md R1) for comparison.
- :func:`latency_over_time`: each probe's latency upper bound (``hi``; a STUCK probe's ``lo``,
  a lower bound) over the report's window, the target as a line, breaches marked: a probe over
  target, STUCK or FAILED. The RPO story of the window at a glance.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.sizes import parse_size
from replmon.probe import ladders
from replmon.signals.verdict import duration

BREACH = "#d62728"
TARGET = "#9467bd"
#: One colour per size class: tab10 without its red (breaches) and purple (the target line).
SERIES = ("#1f77b4", "#ff7f0e", "#2ca02c", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _target_line(ax: Any, target_seconds: float | None) -> None:
    if target_seconds is not None:
        ax.axhline(target_seconds, color=TARGET, linestyle="--", linewidth=1.5, label=f"target {target_seconds:g} s", zorder=1)


def _save(fig: Any, path: Path) -> Path:
    """A PNG written whole or not at all (a full disk leaves no broken chart)."""
    import io

    from replmon.core.files import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    _plt().close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, buf.getvalue(), mode=0o644)


def latency_chart(records: Sequence[ProbeRecord], path: Path, title: str, published: bool = True,
                  target_seconds: float | None = None) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    by_route: dict[str, list[ProbeRecord]] = {}
    for r in records:
        if r.status is ProbeStatus.COMPLETED and r.latency_mid is not None:
            by_route.setdefault(r.route, []).append(r)
    for route, recs in sorted(by_route.items()):
        x = [r.size_bytes / 2**20 for r in recs]
        y = [max(r.latency_mid or 0.0, 1e-3) for r in recs]
        lo = [max(yy - (r.latency_lo or 0.0), 0.0) for yy, r in zip(y, recs, strict=True)]
        hi = [max((r.latency_hi or 0.0) - yy, 0.0) for yy, r in zip(y, recs, strict=True)]
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o", ms=4, capsize=3, alpha=0.8,
                    label=f"{route}: each probe, bar = its interval [lo, hi]")
    late = [r for r in records if r.status is ProbeStatus.COMPLETED and target_seconds is not None and (r.latency_hi or 0) > target_seconds]
    if late:
        ax.scatter([r.size_bytes / 2**20 for r in late], [r.latency_hi for r in late], s=60, facecolors="none", edgecolors=BREACH,
                   linewidths=1.5, label="over target", zorder=3)
    for status, marker in ((ProbeStatus.STUCK, "^"), (ProbeStatus.FAILED, "v")):
        bad = [r for r in records if r.status is status and r.latency_lo is not None]
        if bad:
            ax.scatter([r.size_bytes / 2**20 for r in bad], [max(r.latency_lo or 0.0, 1e-3) for r in bad], marker=marker,
                       color=BREACH, label=f"{status} (at least this long)" if status is ProbeStatus.STUCK else f"{status}", zorder=3)
    if published:
        ref = ladders.ladder("crr-ladder").published_latency_seconds
        for i, (size, (a, b)) in enumerate(sorted(ref.items(), key=lambda kv: parse_size(kv[0]))):
            mib = parse_size(size) / 2**20
            label = "published Tokyo -> Singapore CRR range (R1)" if i == 0 else "_nolegend_"
            ax.vlines(mib, a, b, colors="grey", linewidth=6, alpha=0.35, label=label)
    _target_line(ax, target_seconds)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("probe size (MiB)")
    ax.set_ylabel("replication latency (s, log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


def latency_over_time(records: Sequence[ProbeRecord], path: Path, title: str, *, target_seconds: float,
                      window: tuple[float, float], rpo_window_seconds: float | None = None) -> Path:
    """Each judged probe's latency upper bound at the time it was sent (one series per route and
    size class), the target line, breaches in red, and the span "RPO now" looks at shaded."""
    import matplotlib.dates as mdates

    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=120)

    def when(r: ProbeRecord) -> datetime:
        return datetime.fromtimestamp(r.put_end if r.put_end is not None else r.planned_at, UTC)

    done = [r for r in records if r.status is ProbeStatus.COMPLETED and r.latency_hi is not None]
    ys = [r.latency_hi or 0.0 for r in done] + [r.latency_lo or 0.0 for r in records if r.status is ProbeStatus.STUCK] + [target_seconds]
    positive = [y for y in ys if y > 0]
    log = bool(positive) and max(positive) / max(min(positive), 1e-3) > 50
    floor = max(min(positive, default=1.0) / 2, 1e-3) if log else 0.0
    routes = sorted({r.route for r in done})
    series = sorted({(r.route, r.size_bytes, r.size_class) for r in done})
    for i, (route, _, size) in enumerate(series):  # every probe in its size's colour; a breach also gets a red ring
        mine = [r for r in done if r.route == route and r.size_class == size]
        ax.scatter([when(r) for r in mine], [max(r.latency_hi or 0.0, floor) for r in mine], s=16, alpha=0.85,
                   color=SERIES[i % len(SERIES)], label=(f"{route} " if len(routes) > 1 else "") + f"{size}: latency upper bound", zorder=2)
    late = [r for r in done if (r.latency_hi or 0) > target_seconds]
    if late:
        ax.scatter([when(r) for r in late], [r.latency_hi for r in late], s=70, facecolors="none", edgecolors=BREACH, linewidths=1.5,
                   label="over target", zorder=3)
    stuck = [r for r in records if r.status is ProbeStatus.STUCK]
    if stuck:
        ax.scatter([when(r) for r in stuck], [max(r.latency_lo or target_seconds, floor) for r in stuck], s=40, color=BREACH, marker="^",
                   label="STUCK (at least this long)", zorder=3)
    failed = [r for r in records if r.status is ProbeStatus.FAILED]
    for i, r in enumerate(failed):
        ax.axvline(when(r), color=BREACH, alpha=0.5, linewidth=1, label="FAILED (RPO unbounded)" if i == 0 else "_nolegend_")
    errors = [r for r in records if r.status is ProbeStatus.ERROR]
    for i, r in enumerate(errors):
        ax.axvline(when(r), color="grey", alpha=0.4, linewidth=1, linestyle=":", label="ERROR (not measured)" if i == 0 else "_nolegend_")
    _target_line(ax, target_seconds)
    ax.axhspan(target_seconds, max([target_seconds * 1.5, *ys]) * (3 if log else 1.15), color=BREACH, alpha=0.06, zorder=0)
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor)
    else:
        ax.set_ylim(0, max([target_seconds, *ys]) * 1.15)
    if rpo_window_seconds is not None and rpo_window_seconds < window[1] - window[0]:  # shade it only where it is a part of the window
        ax.axvspan(datetime.fromtimestamp(window[1] - rpo_window_seconds, UTC), datetime.fromtimestamp(window[1], UTC), color="grey",
                   alpha=0.12, zorder=0, label=f"RPO now looks back {duration(rpo_window_seconds)}")
    elif rpo_window_seconds is not None:
        ax.plot([], [], " ", label=f"RPO now looks back {duration(rpo_window_seconds)} (all of this chart)")
    pad = (window[1] - window[0]) * 0.02
    ax.set_xlim(datetime.fromtimestamp(window[0], UTC), datetime.fromtimestamp(window[1] + pad, UTC))
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(ax.xaxis.get_major_locator()))  # type: ignore[no-untyped-call]
    ax.set_xlabel("probe sent (UTC)")
    ax.set_ylabel("replication latency (s" + (", log scale)" if log else ")"))
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if not records:
        ax.text(0.5, 0.5, "no probes in this window", transform=ax.transAxes, ha="center", va="center", color="grey")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    fig.tight_layout()
    return _save(fig, path)
