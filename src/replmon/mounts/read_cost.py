"""What a mount preset's cross-region reads cost: every read through a mount is billed again
(unlike one download to local disk), at the bucket's region's rate for transfer to another region.

Quantities are GiB (2^30 bytes) priced at the per-"GB" rates: the study's own bill, $10 for what
it called 112 GB (112.2 GiB laid out, 112.1 GiB read), matches that reading, not 10^9 bytes
(120.4 GB, $10.8). Modelled from the plan (bytes the read jobs read; the layout written once and kept, see
replmon.mounts.layout) or from a run's stored rows (the bytes fio reported). Rates in
``read_prices.json`` of this package, by the bucket's region; a region without a listed rate is an
error naming the file, never a guess.

>>> got = estimate("mountpoint-xregion", "full", bucket_region="ap-northeast-1")
>>> round(got.read_gib, 1), round(got.per_run, 2)   # the study: "112 GB" read, $10 (rates per GB priced per GiB)
(112.1, 10.1)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from replmon.mounts.presets import PresetError, expand, fio_size

GiB = 2**30


@cache
def prices() -> dict[str, Any]:
    return dict(json.loads(resources.files("replmon.mounts").joinpath("read_prices.json").read_text()))


def transfer_rate(region: str) -> float:
    rates = prices()["s3_transfer_to_other_region_per_gb"]
    if region not in rates:
        raise PresetError(f"--bucket-region {region}: no transfer rate for it in replmon/mounts/read_prices.json "
                          f"(listed: {', '.join(sorted(rates))}); add the S3 pricing page's rate there")
    return float(rates[region])


def read_bytes(preset: str, scale: str, kind: str = "mountpoint") -> tuple[int, list[str]]:
    """Bytes a run's read jobs read once through: each thread its file (a read stops at the last
    whole block: a 500 MiB file read in 8 MiB blocks is 496 MiB). Jobs bounded by their run time
    (time based, in passes, in loops) are listed, not counted.

    >>> read_bytes("burst-read", "full")
    (0, ['ior-read'])
    """
    plan = expand(preset, kind, scale)
    total, timed = 0, []
    for job in plan.jobs:
        if job.writes:
            continue
        if job.options.get("time_based") == "1" or job.passes > 1 or "loops" in job.options:  # bounded by run time
            timed.append(job.name)
            continue
        bs = fio_size(job.options.get("bs", "4k"))
        size = int(job.options.get("filesize") or job.options["size"])
        files = job.threads * int(job.options.get("nrfiles", "1"))
        total += files * (size // bs * bs)
    return total, timed


@dataclass
class ReadCost:
    preset: str
    bucket_region: str
    read_gib: float
    layout_gib: float
    per_run: float
    lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def estimate(preset: str, scale: str = "full", *, bucket_region: str, nat: bool = False, runs_per_month: float = 30,
             read: int | None = None) -> ReadCost:
    """Per run (and per month): transfer of what is read, NAT processing if the client reaches S3
    through a NAT gateway, GET requests (Mountpoint reads in parts), and the kept layout's storage
    and first write. ``read`` overrides the modelled bytes with a run's measured ones."""
    p = prices()
    rate = transfer_rate(bucket_region)
    modelled, timed = read_bytes(preset, scale)
    nbytes = modelled if read is None else read
    plan = expand(preset, "mountpoint", scale)
    layout = sum(f.size for f in plan.layout)
    gib, lay_gib = nbytes / GiB, layout / GiB
    lines: list[dict[str, Any]] = [{"item": f"S3 transfer to another region ({bucket_region} rate)", "quantity": f"{gib:,.1f} GiB", "$ per run": gib * rate}]
    if nat:
        lines.append({"item": "NAT gateway processing", "quantity": f"{gib:,.1f} GiB", "$ per run": gib * p["nat_gateway_processing_per_gb"]})
    gets = nbytes / p["mountpoint_read_part_bytes"]
    lines.append({"item": "GET requests (one per 8 MiB part, modelled)", "quantity": f"{gets:,.0f}", "$ per run": gets / 1000 * p["s3_get_per_1000"]})
    per_run = sum(x["$ per run"] for x in lines)
    once = [{"item": "layout written once (EC2 -> another region; PUTs of 8 MiB parts)", "quantity": f"{lay_gib:,.1f} GiB",
             "$ once": lay_gib * p["ec2_transfer_to_other_region_per_gb"] + layout / p["mountpoint_read_part_bytes"] / 1000 * p["s3_put_per_1000"]},
            {"item": "layout kept (S3 Standard, us-east-1 rate)", "quantity": f"{lay_gib:,.1f} GiB-month",
             "$ per month": lay_gib * p["s3_standard_per_gb_month"]}]
    notes = [f"modelled; prices as of {p['as_of']} (replmon/mounts/read_prices.json); {runs_per_month:g} runs a month: "
             f"${per_run * runs_per_month:,.2f} a month in reads"]
    if timed:
        notes.append(f"time-based jobs read what their run time allows and are not counted: {', '.join(timed)}")
    money = ("$ per run", "$ once", "$ per month")
    return ReadCost(preset, bucket_region, gib, lay_gib, per_run, [{"item": x["item"], "quantity": x["quantity"], **{m: x.get(m, 0.0) for m in money}} for x in lines + once], notes)
