"""The file system's own throughput for a run's window, from CloudWatch, kept beside fio's.

FSx for Lustre publishes ``DataReadBytes`` / ``DataWriteBytes`` in ``AWS/FSx`` (dimension
``FileSystemId``; the ``Sum`` statistic is the bytes of the period, so bytes/s = Sum / period
seconds: FSx for Lustre User Guide, "Amazon FSx for Lustre metrics and dimensions"); EFS publishes
``DataReadIOBytes`` / ``DataWriteIOBytes`` in ``AWS/EFS`` the same way (Amazon EFS User Guide,
"CloudWatch metrics for Amazon EFS"). The FSx study read its throughput over time from these very
series (R4). The runner asks for one-minute sums from an hour before the run (what the file system
did then spent or earned its burst credits: FSx for Lustre publishes no credit balance) to the
run's end, after waiting for the last minutes to be published.

>>> from replmon.core.ports import MetricSeries
>>> class Fake:
...     def read(self, queries, start, end):
...         return [MetricSeries(q.id, ((start, 600.0 * 60),)) for q in queries]
>>> got = collect(Fake(), "AWS/FSx", "fs-1", 7200.0, 7260.0)
>>> got["series"]["DataWriteBytes"], got["before"]["DataWriteBytes"]
([[3600.0, 600.0]], 600.0)
"""

from __future__ import annotations

import statistics
from typing import Any

from replmon.core.ports import MetricQuery, MetricReader

PERIOD_S = 60
#: A period that moved at most this share of the window's median is idle (before or after the I/O).
IDLE_SHARE = 0.01
BEFORE_S = 3600
SERIES: dict[str, dict[str, str]] = {
    "AWS/FSx": {"DataReadBytes": "read", "DataWriteBytes": "write"},
    "AWS/EFS": {"DataReadIOBytes": "read", "DataWriteIOBytes": "write"},
    # the lab's credit proxy (replmon.lab.credits.ByteMeter): FSx's names, metered to the second
    "replmon-lab/Credits": {"DataReadBytes": "read", "DataWriteBytes": "write"},
}


def collect(reader: MetricReader, namespace: str, file_system_id: str, start: float, end: float, *,
            period: int = PERIOD_S, before_s: int = BEFORE_S) -> dict[str, Any]:
    """Per metric: [[epoch s, bytes/s], ...] from ``start - before_s`` to ``end``, and the mean
    rate of the hour before the run (``before``)."""
    metrics = SERIES[namespace]
    queries = [MetricQuery(f"m{i}", namespace, name, (("FileSystemId", file_system_id),), period, "Sum")
               for i, name in enumerate(metrics)]
    names = {q.id: q.metric for q in queries}
    series: dict[str, list[list[float]]] = {name: [] for name in metrics}
    for got in reader.read(queries, start - before_s, end + period):
        series[names[got.id]] += [[t, v / period] for t, v in got.points]
    for points in series.values():
        points.sort()
    before: dict[str, float | None] = {}
    for name, pts in series.items():
        earlier = [v for t, v in pts if t < start]
        before[name] = sum(earlier) / len(earlier) if earlier else None
    return {"namespace": namespace, "file_system_id": file_system_id, "period_s": period, "series": series, "before": before,
            "directions": metrics}


def missing(collected: dict[str, Any] | None, plan: Any, start: float, end: float) -> list[str]:
    """The metrics of the directions ``plan``'s jobs move data in that have no point in the run
    window (as :func:`knees` reads it): a burst preset without them has lost its measurement.

    >>> from replmon.mounts.presets import expand
    >>> got = {"directions": {"DataReadBytes": "read", "DataWriteBytes": "write"}, "period_s": 60,
    ...        "series": {"DataReadBytes": [], "DataWriteBytes": [[0.0, 5.0]]}}
    >>> missing(got, expand("burst-write", "lustre", "tiny"), 30.0, 40.0), missing(got, expand("burst-read", "lustre", "tiny"), 30.0, 40.0)
    ([], ['DataReadBytes'])
    >>> missing(None, expand("burst-read", "lustre", "tiny"), 30.0, 40.0)
    ['the series']
    """
    if not collected:
        return ["the series"]
    wanted = {"write" if j.writes else "read" for j in plan.jobs}
    return [name for name, direction in collected["directions"].items() if direction in wanted
            and not any(start - collected["period_s"] <= t <= end for t, _ in collected["series"].get(name, []))]


def knees(collected: dict[str, Any], start: float, end: float) -> dict[str, Any]:
    """The knee of each direction's series inside the run window (as run.json stores fio's), with
    the series' period (``resolution_s``) and its first point's time (``first_s``, epoch s: where
    the knee's seconds count from). The series is the whole periods of the clients' I/O: idle
    periods before and after it (at most IDLE_SHARE of the window's median: a mount's lookups
    while fio opens its files move a few hundred bytes) are no level of the burst, and the first
    and last periods of the I/O are partly idle (a 1 s meter's first second had the client
    starting up).

    >>> got = {"directions": {"DataWriteBytes": "write"}, "period_s": 1, "series": {"DataWriteBytes":
    ...        [[t, float(v)] for t, v in enumerate([0.001, 5, *[20] * 10, *[3] * 10, 1, 0], start=100)]}}
    >>> k = knees(got, 100.0, 124.0)["write"]
    >>> k["first_s"], k["samples"], k["knee"]["burst"], k["knee"]["sustained"], k["knee"]["at_s"]
    (102, 20, 20.0, 3.0, 10.0)
    """
    from replmon.mounts.knee import find_knee

    out: dict[str, Any] = {}
    for name, direction in collected["directions"].items():
        pts = [(t, v) for t, v in collected["series"].get(name, []) if start - collected["period_s"] <= t <= end]
        idle = IDLE_SHARE * statistics.median(v for _, v in pts) if pts else 0.0
        while pts and pts[0][1] <= idle:  # from the first period of the clients' I/O, as fio's log starts at its first I/O
            pts.pop(0)
        while pts and pts[-1][1] <= idle:
            pts.pop()
        pts = pts[1:-1]  # the first and the last of them are cut by the I/O's start and end: part of a period each
        if pts:
            k = find_knee([t for t, _ in pts], [v for _, v in pts])
            out[direction] = {"samples": len(pts), "metric": name, "resolution_s": collected["period_s"], "first_s": pts[0][0],
                              "knee": k.to_json() if k else None}
    return out
