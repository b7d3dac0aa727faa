"""Latency against size, log-log, every trial with its interval as an error bar (the shape of
the published CRR experiment, docs/REFERENCES.md R1, whose ranges are drawn for comparison)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.sizes import parse_size
from replmon.probe import ladders


def latency_chart(records: Sequence[ProbeRecord], path: Path, title: str, published: bool = True) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o", ms=4, capsize=3, alpha=0.8, label=f"{route} (interval: last PENDING .. first COMPLETED)")
    for status, marker in ((ProbeStatus.STUCK, "x"), (ProbeStatus.FAILED, "v")):
        bad = [r for r in records if r.status is status and r.latency_lo is not None]
        if bad:
            ax.scatter([r.size_bytes / 2**20 for r in bad], [max(r.latency_lo or 0.0, 1e-3) for r in bad], marker=marker,
                       color="red", label=f"{status} (lower bound)")
    if published:
        ref = ladders.ladder("crr-ladder").published_latency_seconds
        for i, (size, (a, b)) in enumerate(sorted(ref.items(), key=lambda kv: parse_size(kv[0]))):
            mib = parse_size(size) / 2**20
            label = "published Tokyo->Singapore CRR range (REFERENCES R1)" if i == 0 else "_nolegend_"
            ax.vlines(mib, a, b, colors="grey", linewidth=6, alpha=0.35, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("probe size (MiB)")
    ax.set_ylabel("replication latency (s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> Path:
    """A PNG written whole or not at all (a full disk leaves no broken chart)."""
    import io

    import matplotlib.pyplot as plt

    from replmon.core.files import write_atomic

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, buf.getvalue(), mode=0o644)
