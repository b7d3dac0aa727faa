"""Burst versus sustained throughput from fio's 1 s bandwidth log: the knee where credits run out.

fio's ``write_bw_log`` lines are ``time (ms), value (KiB/s), direction (0 read, 1 write, 2 trim),
block size, offset[, priority]`` (fio HOWTO, "Log File Formats"); with ``log_unix_epoch=1`` the
time is Unix epoch ms, so logs of several jobs line up. Samples are summed per whole second and
direction.

The change points come from ``ruptures`` (PELT, least-squares cost) with a penalty scaled to the
log's own noise (BIC-like: 2 sigma^2 ln n, sigma from the median absolute first difference), so
the same code works at 100 MB/s and 3 GB/s. Among the segments it finds, the knee is the boundary
with the largest drop; it counts only if the level after it is at least ``min_drop`` below the
level before (25 % by default) - a flat log, however noisy, gives no knee.

>>> flat = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 103.0, 97.0, 100.0, 101.0, 99.0, 100.0]
>>> find_knee(list(range(12)), flat) is None
True
>>> k = find_knee(list(range(12)), [600.0] * 6 + [150.0] * 6)
>>> k.burst, k.sustained, k.at_s
(600.0, 150.0, 6.0)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from replmon.mounts.fioresult import FioResultError

MIN_SEGMENT = 3  # samples (seconds): a burst shorter than 3 s is not told from a hiccup
MIN_DROP = 0.25
DIRECTION_NAMES = {0: "read", 1: "write", 2: "trim"}


@dataclass(frozen=True)
class Knee:
    burst: float  # bytes/s, median of the segment before the knee
    sustained: float  # bytes/s, median after it
    at_s: float  # seconds from the log's first sample to the knee

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_bw_log(text: str, source: str = "bandwidth log") -> list[tuple[float, float, str]]:
    """(time s, bytes/s, direction) per line of a fio bandwidth log."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            t_ms, kib_s, direction = int(parts[0]), float(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            raise FioResultError(f"{source}:{n}: {line!r} is not 'time ms, KiB/s, direction, ...' (fio write_bw_log)") from None
        out.append((t_ms / 1000, kib_s * 1024, DIRECTION_NAMES.get(direction, str(direction))))
    return out


def per_second(samples: list[tuple[float, float, str]], direction: str) -> tuple[list[float], list[float]]:
    """Samples of one direction summed per whole second (jobs' logs add up); seconds from the first."""
    buckets: dict[int, float] = {}
    for t, v, d in samples:
        if d == direction:
            buckets[int(t)] = buckets.get(int(t), 0.0) + v
    if not buckets:
        return [], []
    first = min(buckets)
    secs = sorted(buckets)
    return [float(s - first) for s in secs], [buckets[s] for s in secs]


def find_knee(times: list[float], values: list[float], *, min_drop: float = MIN_DROP) -> Knee | None:
    if len(values) < 2 * MIN_SEGMENT:
        return None
    import numpy as np
    import ruptures as rpt

    x = np.asarray(values, dtype=float)
    diffs = np.abs(np.diff(x))
    sigma = float(np.median(np.abs(diffs - np.median(diffs)))) * 1.4826 / np.sqrt(2)
    sigma = max(sigma, 1e-3 * float(np.median(np.abs(x))), 1e-9)  # a perfectly flat log still gets a penalty
    penalty = 2 * sigma**2 * np.log(len(x))
    ends = rpt.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(x.reshape(-1, 1)).predict(pen=penalty)
    starts = [0, *ends[:-1]]
    levels = [statistics.median(values[a:b]) for a, b in zip(starts, ends, strict=True)]
    best = None
    for i in range(len(levels) - 1):
        drop = levels[i] - levels[i + 1]
        if best is None or drop > best[0]:
            best = (drop, i)
    if best is None:
        return None
    i = best[1]
    boundary = ends[i]
    burst = levels[i]
    sustained = statistics.median(values[boundary:])
    if burst <= 0 or sustained > burst * (1 - min_drop):
        return None
    return Knee(burst=burst, sustained=sustained, at_s=float(times[boundary] - times[0]))


def by_direction(samples: list[tuple[float, float, str]]) -> dict[str, dict[str, Any]]:
    """Each direction the logs have: its seconds of samples and its knee (None: no knee), as stored in run.json."""
    out: dict[str, dict[str, Any]] = {}
    for direction in ("write", "read"):
        times, values = per_second(samples, direction)
        if values:
            k = find_knee(times, values)
            out[direction] = {"samples": len(values), "knee": k.to_json() if k else None}
    return out


def table_row(direction: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One direction of :func:`by_direction` as a printed row, MiB/s."""
    k = entry.get("knee")
    return {"direction": direction, "seconds": entry["samples"],
            "burst MiB/s": f"{k['burst'] / 2**20:.1f}" if k else "-",
            "sustained MiB/s": f"{k['sustained'] / 2**20:.1f}" if k else "-",
            "knee at s": f"{k['at_s']:.0f}" if k else "no knee"}
