"""The EC2 hosts a mount stack can run its targets on, and the network ceiling each puts on a
published figure: a study's cell that needs more than the host's network carries measures the
host, not the file system.

Network bandwidth per instance type, as the Amazon EC2 Instance Types Guide lists it
("Specifications for Amazon EC2 general purpose instances" / "compute optimized instances",
Network specifications; https://docs.aws.amazon.com/ec2/latest/instancetypes/co.md). An
``xlarge`` of 32 vCPU has its figure as a baseline; ``m6i.4xlarge`` (16 vCPU) has "up to"
12.5 Gbps: a burst on network credits, its baseline lower. One TCP flow carries at most 5 Gbps
outside a cluster placement group (EC2 User Guide, "Amazon EC2 instance network bandwidth",
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html): NFS with
``nconnect=16`` spreads a mount over 16 flows, 80 Gbps of flows, so the instance's figure binds.

>>> gbps(2462 * 2**20)              # R5's 1M read: MiB/s to Gbps
20.7
>>> ceiling_mib_s("m6i.8xlarge")    # 12.5 Gbps in MiB/s
1490.1
>>> [c for c, _ in over("nfs-matrix", "m6i.8xlarge")]
['1M read', '1M randread', '1M write', '1M randwrite', '32K read', '32K randread']
>>> over("nfs-matrix", "c6in.8xlarge")
[]
"""

from __future__ import annotations

from dataclasses import dataclass

from replmon.mounts import presets as presets_mod

MiB = 2**20
MB = 1e6


@dataclass(frozen=True)
class Host:
    instance_type: str
    vcpu: int
    memory_gib: int
    network_gbps: float
    burst: bool = False  # "up to": the figure is a burst on network credits, the baseline lower


#: The template's InstanceType choices (templates/mount-baselines.yaml), one place.
HOSTS: dict[str, Host] = {h.instance_type: h for h in (
    Host("c6in.8xlarge", 32, 64, 50.0),
    Host("m6i.8xlarge", 32, 128, 12.5),
    Host("m5n.8xlarge", 32, 128, 25.0),
    Host("m6i.4xlarge", 16, 64, 12.5, burst=True),
)}
#: The stack's default host: it carries every published figure of every preset (tests/test_mounts_template.py).
DEFAULT_HOST = "c6in.8xlarge"


def gbps(bytes_per_s: float) -> float:
    """Bytes/s as Gbps (10^9 bits/s), one decimal."""
    return round(bytes_per_s * 8 / 1e9, 1)


def ceiling_mib_s(instance_type: str) -> float:
    """The host's network figure as MiB/s (what fio reports)."""
    return round(HOSTS[instance_type].network_gbps * 1e9 / 8 / MiB, 1)


def published_rates(preset: str) -> list[tuple[str, float]]:
    """(cell, bytes/s) of each published throughput figure of ``preset`` (none for ratios)."""
    pub = presets_mod.raw(preset).get("published") or {}
    unit = {"MiB/s": MiB, "MB/s": MB}.get(pub.get("unit", ""))
    if unit is None:
        return []
    values = pub.get("values", {})
    if "row" in pub:
        return [(f"{row} {col}", float(v) * unit) for row, cols in values.items() for col, v in cols.items()]
    return [(name, float(v) * unit) for name, v in values.items() if "/" not in name]


def over(preset: str, instance_type: str) -> list[tuple[str, float]]:
    """The published cells (and their Gbps) that need more network than ``instance_type`` has."""
    limit = HOSTS[instance_type].network_gbps * 1e9 / 8
    return [(cell, gbps(rate)) for cell, rate in published_rates(preset) if rate > limit]
