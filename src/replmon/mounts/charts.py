"""The studies' charts from stored results (matplotlib, Agg; the CLI and the lab only, never Lambda).

- ``nfs-matrix`` (R5): a bs x rw heat map per target, each cell MiB/s and IOPS, the published pair under it;
- ``burst-*`` (R4): throughput over time, the study's graph: fio's summed bandwidth (from the
  logs when at hand, else the series stored with the result) and the file system's own
  DataReadBytes/DataWriteBytes, the knee marked; bars only for a result stored without a series;
- ``express-vs-standard`` (R3): bars on a log axis (100 MiB rows and 4 KiB rows differ a
  thousandfold: on a linear axis the 4 KiB bars cannot be seen);
- ``mountpoint-xregion`` (R2): MiB/s against threads per file size, the published lines dashed;
- the rest: bars per row.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from replmon.core.files import write_atomic
from replmon.mounts import knee as knee_mod
from replmon.mounts import presets as presets_mod
from replmon.mounts.report import MB, MiB, TargetResult


def _burst_over_time(ax: Any, r: TargetResult, logs: dict[str, str] | None) -> bool:
    """fio's summed bandwidth over time (the logs, else the series stored with the result) and the
    file system's own series on the same axis, MB/s; the knee dashed. False when there is neither."""
    series: dict[str, tuple[list[float], list[float]]] = {}
    if logs:
        samples = [s for name, text in sorted(logs.items()) for s in knee_mod.read_bw_log(text, name)]
        for direction in ("write", "read"):
            t, v = knee_mod.per_second(samples, direction)
            if v:
                series[direction] = (t, v)
    else:
        for direction, got in (json.loads(r.run.get("bw_series") or "null") or {}).items():
            series[direction] = ([float(x) for x in got["t"]], [float(x) for x in got["bytes_s"]])
    service = json.loads(r.run.get("service") or "null") or {}
    start = float(r.run.get("fio_start") or r.run.get("start") or 0)  # the measured I/O's start, as fio's series
    for name, points in (service.get("series") or {}).items():
        inside = [(t - start, v) for t, v in points if t >= start - float(service.get("period_s") or 60)]
        if inside:
            ax.step([t for t, _ in inside], [v / MB for _, v in inside], where="post", ls=":", label=f"file system {name}")
    for direction, (t, v) in series.items():
        ax.plot(t, [x / MB for x in v], label=f"fio {direction}")
    for item in r.rows.values():
        if item.get("knee_at_s") is not None:
            ax.axvline(float(item["knee_at_s"]), ls="--", color="k")
    if not series and not service.get("series"):
        return False
    ax.set_xlabel("s from the start of the measured I/O")
    ax.set_ylabel("MB/s")
    ax.legend(fontsize=7)
    return True


def chart(preset: str, results: list[TargetResult], path: Path, bw_logs: dict[str, dict[str, str]] | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = presets_mod.raw(preset)
    pub = spec.get("published", {})
    env = presets_mod.matrix_cells(spec) if "matrix" in spec else {}
    n = max(1, len(results))
    fig, axes = plt.subplots(1, n, figsize=(5.5 * n, 4.5), squeeze=False)
    for ax, r in zip(axes[0], results, strict=False):
        ax.set_title(f"{r.target}: {preset}", fontsize=9)
        if preset == "nfs-matrix":
            bss, rws = spec["matrix"]["bs"], spec["matrix"]["rw"]

            def cell(b: str, w: str, field: str, r: TargetResult = r) -> float:
                job = next((j for j, c in env.items() if c == {"bs": b, "rw": w}), None)
                hit = [i for k, i in r.rows.items() if k.split("/")[0] == job and not i.get("error")]
                return sum(float(i.get(field) or 0) for i in hit) if hit else float("nan")

            grid = [[cell(b, w, "bw_bytes") / MiB for w in rws] for b in bss]
            im = ax.imshow(grid, cmap="viridis")
            ax.set_xticks(range(len(rws)), rws)
            ax.set_yticks(range(len(bss)), bss)
            for i, b in enumerate(bss):
                for j, w in enumerate(rws):
                    mib, iops = grid[i][j], cell(b, w, "iops")
                    published = f"\npub {pub['values'][b][w]:g} ({pub['iops'][b][w]:,.0f})"
                    text = "skipped" if mib != mib else f"{mib:.0f} MiB/s\n{iops:,.0f} IOPS"
                    ax.text(j, i, text + published, ha="center", va="center", fontsize=6, color="k" if mib != mib else "w")
            fig.colorbar(im, ax=ax, label="MiB/s")
        elif spec.get("burst"):
            drew = _burst_over_time(ax, r, (bw_logs or {}).get(r.target))
            if not drew:
                labels, values = [], []
                for key, item in r.rows.items():
                    for what in ("burst_bytes", "sustained_bytes"):
                        if item.get(what) is not None:  # 0 is a level (a bar of nothing), not a missing one
                            labels.append(f"{key} {what.split('_')[0]}")
                            values.append(float(item[what]) / MB)
                labels += ["published burst", "published sustained"]
                values += [pub["values"]["burst"], pub["values"]["sustained"]]
                ax.barh(labels, values)
                ax.set_xlabel("MB/s")
        elif "matrix" in spec and "threads" in spec["matrix"]:
            for f in spec["matrix"]["file"]:
                pts = sorted((int(env[k.split("/")[0]]["threads"]), float(i["bw_bytes"]) / MiB) for k, i in r.rows.items()
                             if env.get(k.split("/")[0], {}).get("file") == f and not i.get("error"))
                line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f)[0]
                threads = [int(t) for t in spec["matrix"]["threads"]]
                ax.plot(threads, [pub["values"][f][str(t)] for t in threads], ls="--", color=line.get_color(), alpha=0.6)
            ax.set_xlabel("threads (dashed: published, Ohio -> Tokyo)")
            ax.set_ylabel("MiB/s")
            ax.legend(title="file")
        else:
            keys = [k for k in r.rows if float(r.rows[k].get("bw_bytes") or 0) > 0]
            ax.barh(keys, [float(r.rows[k]["bw_bytes"]) / MiB for k in keys])
            ax.set_xscale("log")  # R3: 100 MiB and 4 KiB rows on one axis
            ax.set_xlabel("MiB/s (log scale)")
            ax.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, buf.getvalue(), mode=0o644)  # whole or not at all (core/files.py)
