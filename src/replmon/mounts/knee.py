"""Burst versus sustained throughput over time: the plateau a burst file system starts on, where
it first falls, and how long the fall takes.

Input is a series of (seconds, bytes/s): fio's bandwidth logs (``write_bw_log``; lines ``time
(ms), value (KiB/s), direction (0 read, 1 write, 2 trim), block size, offset[, priority]``, fio
HOWTO "Log File Formats"; with ``log_unix_epoch=1`` the times are Unix ms so several jobs' logs
line up) or a file system's own CloudWatch series (bytes per period / period).

A log is **one job's** bandwidth: its samples are averaged within each whole second (a
``log_avg_msec=500`` log has two samples a second, both rates; adding them would double it),
then the jobs' logs are **summed** per second and direction (the aggregate throughput); a
second no job logged is 0 (fio writes no entry for a window in which a job moved nothing).

The detector reads the summed series at the finest resolution (1, 2, 3, 5, 10 ... s bins) at
which at most a tenth of the bins are empty (:func:`resolution`): jobs that complete a write only
when a whole multipart upload does (Mountpoint behind a slow link) leave most seconds empty.

1. **Noise.** sigma = median(|x[i+1] - x[i]|) / (0.6745 * sqrt 2): for white noise of standard
   deviation s the first difference has standard deviation s*sqrt 2, and the median of a
   half-normal is 0.6745 times its scale, so this is s, unmoved by the few large steps a knee
   adds (a step is one difference among hundreds).
2. **Segments.** ``ruptures``' penalised change-point search (PELT on the least-squares cost,
   through its C ``KernelCPD`` with the linear kernel: the same cost, ~300x faster than the
   pure-Python ``Pelt("l2")``; a 2 h log of 7,200 s takes ~0.3 s) with the penalty
   2 sigma^2 ln n (BIC for a mean shift in noise sigma), at least ``MIN_SEGMENT`` samples each.
3. **Merge.** Adjacent segments whose levels (medians) differ by less than ``MERGE_SIGMAS``
   sigma are one segment: the closest pair first, until none is left. PELT splits a ramp into
   steps; steps within noise of each other are not separate levels.
4. **Read the shape.** ``burst`` is the level of the segment the series starts on (the plateau
   from the start). The plateau lasts until the last segment, before the fall (the first segment
   from which every level is below the knee line ``burst * (1 - min_drop)``: a pause in the
   burst, below the line and back, is not the fall), that is still within noise of the burst level
   (``decline_start_s``, also ``burst_duration_s``: a noisy burst may dip and recover before it
   falls for good). ``sustained`` is the level of the later half of the last segment (an
   exponential decay is still settling at its start); the decline ends where the segments from
   there on stay within noise of it (``decline_end_s``). The **knee** (``at_s``) is the first
   sample, from the plateau's end on, where the running median of the ``2 * MIN_SEGMENT + 1``
   samples around it is below the line (a segment's level would be early on a decay: a segment
   spanning the fall has its median below the line before the series crosses it). A step drop has
   decline_start = at = decline_end; a ramp or an exponential decay has them apart.

There is no knee unless ``sustained <= burst * (1 - min_drop)`` (25 % by default): a flat log,
however noisy, or one that rises (a cache warming up), gives none.

>>> flat = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 103.0, 97.0, 100.0, 101.0, 99.0, 100.0]
>>> find_knee(list(range(12)), flat) is None
True
>>> k = find_knee(list(range(12)), [600.0] * 6 + [150.0] * 6)
>>> k.burst, k.sustained, k.at_s, k.decline_start_s, k.decline_end_s
(600.0, 150.0, 6.0, 6.0, 6.0)
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from replmon.mounts.fioresult import FioResultError

MIN_SEGMENT = 3  # samples: a burst shorter than 3 samples is not told from a hiccup
MIN_DROP = 0.25
MERGE_SIGMAS = 3.0
#: median(|dx|) of white noise N(0, s^2) is 0.6745 * sqrt(2) * s
SIGMA_FROM_MEDIAN_ABS_DIFF = 1 / (0.6744897501960817 * math.sqrt(2))
DIRECTION_NAMES = {0: "read", 1: "write", 2: "trim"}

Sample = tuple[float, float, str, str]  # (time s, bytes/s, direction, source log)


@dataclass(frozen=True)
class Knee:
    burst: float  # bytes/s, level of the plateau the series starts on
    sustained: float  # bytes/s, level of the later half of the last segment
    at_s: float  # seconds from the first sample to the first segment below burst * (1 - min_drop)
    decline_start_s: float  # where the burst plateau ends (= burst duration)
    decline_end_s: float  # where the sustained level begins
    sigma: float  # the noise estimate the segments were judged with (bytes/s)
    segments: int  # after merging

    @property
    def burst_duration_s(self) -> float:
        return self.decline_start_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "burst_duration_s": self.burst_duration_s}


def read_bw_log(text: str, source: str = "bandwidth log") -> list[Sample]:
    """(time s, bytes/s, direction, source) per line of one fio bandwidth log."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            t_ms, kib_s, direction = int(parts[0]), float(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            raise FioResultError(f"{source}:{n}: {line!r} is not 'time ms, KiB/s, direction, ...' (fio write_bw_log)") from None
        out.append((t_ms / 1000, kib_s * 1024, DIRECTION_NAMES.get(direction, str(direction)), source))
    return out


def per_second(samples: Sequence[Sample], direction: str) -> tuple[list[float], list[float]]:
    """One direction as whole seconds from the first: each log's samples averaged within a second,
    then the logs summed (they are different jobs); a second in which no job logged is 0. fio logs
    an entry per window only when the job moved bytes in it ("No entries for interval": its
    stat.c, ``__add_samples``): a job blocked behind a throttled mount logs nothing, and a second
    nobody logged moved nothing - not a second to leave out (leaving it out would splice the
    levels on both sides together).

    >>> half = [(0.5, 100.0, "read", "a"), (1.0, 100.0, "read", "a"), (1.5, 120.0, "read", "a")]
    >>> per_second(half, "read")   # two 500 ms samples of 100 are 100, not 200
    ([0.0, 1.0], [100.0, 110.0])
    >>> per_second(half + [(0.5, 50.0, "read", "b")], "read")[1][0]   # a second job adds
    150.0
    >>> per_second([(0.9, 8.0, "write", "a"), (3.9, 8.0, "write", "a")], "write")   # nothing logged in seconds 1 and 2
    ([0.0, 1.0, 2.0, 3.0], [8.0, 0.0, 0.0, 8.0])
    """
    per_log: dict[tuple[str, int], list[float]] = {}
    for t, v, d, source in samples:
        if d == direction:
            per_log.setdefault((source, int(t)), []).append(v)
    if not per_log:
        return [], []
    seconds: dict[int, float] = {}
    for (_source, s), values in per_log.items():
        seconds[s] = seconds.get(s, 0.0) + statistics.fmean(values)
    first, last = min(seconds), max(seconds)
    return [float(s - first) for s in range(first, last + 1)], [seconds.get(s, 0.0) for s in range(first, last + 1)]


def noise_sigma(values: Sequence[float]) -> float:
    """sigma = median(|dx|) / (0.6745 sqrt 2), floored so a perfectly flat series still gets a
    penalty (0.1 % of its median level)."""
    diffs = [abs(b - a) for a, b in itertools.pairwise(values)]
    sigma = statistics.median(diffs) * SIGMA_FROM_MEDIAN_ABS_DIFF if diffs else 0.0
    return max(sigma, 1e-3 * abs(statistics.median(values)), 1e-9)


def segments(values: Sequence[float], sigma: float) -> list[tuple[int, int]]:
    """[start, end) index pairs: PELT's change points, then adjacent levels within noise merged."""
    import numpy as np
    import ruptures as rpt

    x = np.asarray(values, dtype=float)
    algo = rpt.KernelCPD(kernel="linear", min_size=MIN_SEGMENT, jump=1).fit(x.reshape(-1, 1))
    ends = [int(e) for e in algo.predict(pen=2 * sigma**2 * math.log(len(x)))]
    segs = list(zip([0, *ends[:-1]], ends, strict=True))
    while len(segs) > 1:  # merge the closest adjacent pair within noise, until none is
        levels = [statistics.median(values[a:b]) for a, b in segs]
        gaps = [abs(levels[i + 1] - levels[i]) for i in range(len(segs) - 1)]
        i = min(range(len(gaps)), key=gaps.__getitem__)
        if gaps[i] >= MERGE_SIGMAS * sigma:
            break
        segs[i : i + 2] = [(segs[i][0], segs[i + 1][1])]
    return segs


def find_knee(times: Sequence[float], values: Sequence[float], *, min_drop: float = MIN_DROP) -> Knee | None:
    if len(values) < 2 * MIN_SEGMENT:
        return None
    sigma = noise_sigma(values)
    segs = segments(values, sigma)
    levels = [statistics.median(values[a:b]) for a, b in segs]
    a, b = segs[-1]
    burst, sustained = levels[0], statistics.median(values[(a + b) // 2 : b])  # the later half: a decay's tail settles
    if burst <= 0 or sustained > burst * (1 - min_drop) or len(segs) < 2:  # one segment: no level to fall from or to
        return None
    band = MERGE_SIGMAS * sigma
    line = burst * (1 - min_drop)
    # The fall for good: the first segment from which every level is below the line. A burst the
    # client paused in for a few seconds (a segment below the line, then the burst level again) has
    # not fallen there; a pause that runs into the fall is part of it (nothing tells it apart).
    first_low = len(segs) - 1
    while first_low > 0 and levels[first_low - 1] < line:
        first_low -= 1
    # The plateau ends after the last segment, before the fall, still within noise of the burst
    # level (a noisy burst may dip and recover before it falls for good).
    plateau = 1 + max(i for i in range(max(1, first_low)) if i == 0 or levels[i] > burst - band)
    # segments to the end within noise of the sustained level (or within the knee's own drop of it:
    # a metered series is so flat that its noise is less than one chunk of the meter's count)
    tail = len(segs) - 1
    while tail > first_low and levels[tail - 1] < sustained + max(band, sustained * min_drop):
        tail -= 1
    w = MIN_SEGMENT
    start = segs[plateau - 1][0]
    crossing = next((i for i in range(start, len(values))
                     if statistics.median(values[max(0, i - w): i + w + 1]) < line), segs[-1][0])

    def at(i: int) -> float:
        return float(times[segs[i][0]] - times[0])

    return Knee(burst=burst, sustained=sustained, at_s=float(times[crossing] - times[0]), decline_start_s=at(plateau),
                decline_end_s=at(max(tail, plateau)), sigma=sigma, segments=len(segs))


#: Bin widths (s) the detector may read a log at, finest first; and the share of empty bins it accepts.
RESOLUTIONS = (1, 2, 3, 5, 10, 15, 30, 60)
MAX_EMPTY_SHARE = 0.1


def resolution(values: Sequence[float]) -> int:
    """The finest bin width (seconds) at which at most MAX_EMPTY_SHARE of the bins are empty. A
    second in which no job completed an I/O says nothing about the level: jobs blocked behind
    whole multipart uploads (Mountpoint's 8 MiB parts at a few MiB/s) complete a write every few
    seconds, and a per-second series of them is mostly zeros and spikes. Steady I/O (fio on FSx
    at hundreds of MB/s) is read to the second.

    When no width gets the empty bins under MAX_EMPTY_SHARE (a long silence in the log: jobs blocked
    for tens of seconds), the width with the fewest empty bins (the finer on a tie), among those
    that still give the detector 2 * MIN_SEGMENT bins: not 1 s, the noisiest reading of such a log.

    >>> resolution([5.0] * 60), resolution([10.0, 0.0] * 30), resolution([30.0, 0.0, 0.0] * 20)
    (1, 2, 3)
    >>> resolution([20.0] * 40 + [0.0] * 25 + [9.0, 0.0, 0.0, 0.0, 0.0, 0.0] * 6)   # 25 s silent, then sparse
    15
    """
    shares: list[tuple[float, int]] = []
    for w in RESOLUTIONS:
        bins = [sum(values[i:i + w]) for i in range(0, len(values), w)]
        if len(bins) < 2 * MIN_SEGMENT:
            break
        empty = sum(1 for b in bins if b == 0) / len(bins)
        if empty <= MAX_EMPTY_SHARE:
            return w
        shares.append((empty, w))
    return min(shares)[1] if shares else 1


def binned(times: Sequence[float], values: Sequence[float], width: int) -> tuple[list[float], list[float]]:
    """Per-second values as means over bins of ``width`` seconds, each at its first second."""
    return ([float(times[i]) for i in range(0, len(values), width)],
            [statistics.fmean(values[i:i + width]) for i in range(0, len(values), width)])


def by_direction(samples: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """Each direction the logs have: its seconds of samples, their mean (bytes/s: the level of a
    run without a knee), the resolution the knee was looked for at (:func:`resolution`) and its
    knee (None: no knee), as stored in run.json."""
    out: dict[str, dict[str, Any]] = {}
    for direction in ("write", "read"):
        times, values = per_second(samples, direction)
        if values:
            width = resolution(values)
            k = find_knee(*binned(times, values, width))
            out[direction] = {"samples": len(values), "mean": statistics.fmean(values), "resolution_s": width,
                              "knee": k.to_json() if k else None}
    return out


def table_row(direction: str, entry: dict[str, Any]) -> dict[str, Any]:
    """One direction of :func:`by_direction` as a printed row, MiB/s. Without a knee the series
    still has a level: its mean, printed as the sustained level with "no knee".

    >>> table_row("write", {"samples": 60, "mean": 8 * 2**20, "knee": None})["sustained MiB/s"]
    '8.0 (one level)'
    """
    k = entry.get("knee")
    level = entry.get("mean")
    return {"direction": direction, "seconds": entry["samples"], "resolution s": entry.get("resolution_s", 1),
            "burst MiB/s": f"{k['burst'] / 2**20:.1f}" if k else "-",
            "burst s": f"{k['decline_start_s']:.0f}" if k else "-",
            "knee at s": f"{k['at_s']:.0f}" if k else "no knee",
            "decline ends s": f"{k['decline_end_s']:.0f}" if k else "-",
            "sustained MiB/s": f"{k['sustained'] / 2**20:.1f}" if k else (f"{level / 2**20:.1f} (one level)" if level is not None else "-")}
