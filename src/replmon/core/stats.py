"""Statistics over probe records: percentiles, share within target, per route and size class.

>>> percentile([1.0, 2.0, 3.0, 4.0], 50)
2.5
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from replmon.core.record import ProbeRecord, ProbeStatus


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class SizeSummary:
    route: str
    size_class: str
    size_bytes: int
    probes: int
    completed: int
    failed: int
    stuck: int
    errors: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None
    share_within_target: float | None  # COMPLETED with hi <= target, over COMPLETED+FAILED+STUCK (ERROR, INTERRUPTED measured nothing)
    mib_per_s: float | None  # size / median latency
    heads_per_probe: float | None
    max_width: float | None  # widest latency interval among COMPLETED probes
    min_bound: float | None = None  # the narrowest and widest bound the policy promised (COMPLETED probes)
    max_bound: float | None = None
    bound_met: int = 0  # COMPLETED probes whose interval is within its bound

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def summarize(records: Iterable[ProbeRecord]) -> list[SizeSummary]:
    """One summary per (route, size class), ordered by route then size."""
    groups: dict[tuple[str, int], list[ProbeRecord]] = {}
    for rec in records:
        groups.setdefault((rec.route, rec.size_bytes), []).append(rec)
    out = []
    for (route, size), recs in sorted(groups.items()):
        done = [r for r in recs if r.status is ProbeStatus.COMPLETED]
        mids = [r.latency_mid for r in done if r.latency_mid is not None]
        judged = [r for r in recs if r.status.judged]
        p50 = percentile(mids, 50)
        widths = [r.width for r in done if r.width is not None]
        bounds = [r.bound_seconds for r in done if r.bound_seconds is not None]
        heads = [r.head_count for r in recs if r.head_count]
        out.append(
            SizeSummary(
                route=route,
                size_class=recs[0].size_class,
                size_bytes=size,
                probes=len(recs),
                completed=len(done),
                failed=sum(r.status is ProbeStatus.FAILED for r in recs),
                stuck=sum(r.status is ProbeStatus.STUCK for r in recs),
                errors=sum(r.status is ProbeStatus.ERROR for r in recs),
                p50=p50,
                p90=percentile(mids, 90),
                p99=percentile(mids, 99),
                max=max(mids) if mids else None,
                share_within_target=(sum(r.within_target for r in judged) / len(judged)) if judged else None,
                mib_per_s=(size / 2**20 / p50) if p50 else None,
                heads_per_probe=(sum(heads) / len(heads)) if heads else None,
                max_width=max(widths) if widths else None,
                min_bound=min(bounds) if bounds else None,
                max_bound=max(bounds) if bounds else None,
                bound_met=sum(1 for r in done if r.bound_met),
            )
        )
    return out
