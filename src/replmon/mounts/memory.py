"""Memory preflight: a job whose fio buffers would not fit the task's memory is skipped with the
reason stored, instead of the kernel's OOM killer ending the task with nothing recorded.

fio fills one block per request in flight per thread (``FioJob.buffer_bytes``): SEQ8M-Q128T16
on a 3 GiB file is 16 x 128 x 8 MiB = 16 GiB. Stonewalled jobs run one at a time, so a plan needs
its largest job's buffers at once. The limit is the container's cgroup (``memory.max``, cgroup
v2; ``memory.limit_in_bytes``, v1), else the machine's memory. What the mount's own client holds
is not fio's to use: a FUSE client (Mountpoint's prefetcher, s3fs) keeps a quarter of the limit,
a kernel client a tenth (page cache, the runner itself).

>>> from replmon.mounts.presets import expand
>>> plan = expand("mountpoint-xregion", "mountpoint", "full")
>>> [s.job for s in preflight(plan, 16 * 2**30).skipped]   # a 16 GiB task: the T16 jobs of 1G and 3G
['SEQ8M-Q128T16-1G-Read', 'SEQ8M-Q128T16-3G-Read']
>>> preflight(plan, 96 * 2**30).skipped
()
"""

from __future__ import annotations

from pathlib import Path

from replmon.mounts.presets import Plan, Skipped

GiB = 2**30
FUSE_RESERVE = 0.25
KERNEL_RESERVE = 0.10
FUSE_KINDS = frozenset({"mountpoint", "s3fs"})
CGROUP_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
NO_LIMIT = 2**60  # cgroup v1 writes a huge number for "unlimited"


def memory_limit(cgroup_files: tuple[str, ...] = CGROUP_FILES, meminfo: str = "/proc/meminfo") -> tuple[int, str]:
    """(bytes, where it came from): the cgroup's limit if it has one, else MemTotal."""
    for f in cgroup_files:
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT:
            return int(text), f
    for line in Path(meminfo).read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024, meminfo
    raise OSError(f"no memory limit in {', '.join(cgroup_files)} and no MemTotal in {meminfo}")


def usable(limit: int, target_kind: str) -> int:
    return int(limit * (1 - (FUSE_RESERVE if target_kind in FUSE_KINDS else KERNEL_RESERVE)))


def preflight(plan: Plan, limit: int, source: str = "the task's memory") -> Plan:
    """The plan without the jobs whose buffers exceed what the target leaves fio of ``limit``."""
    room = usable(limit, plan.target_kind)
    skipped = []
    for job in plan.jobs:
        need = job.buffer_bytes()
        if need > room:
            o = job.options
            skipped.append(Skipped(job.name, f"memory: fio needs {need / GiB:.1f} GiB of buffers ({o.get('numjobs', '1')} threads x "
                                             f"{need // int(o.get('numjobs', '1')) // 2**20} MiB in flight); {source} is "
                                             f"{limit / GiB:.1f} GiB, {room / GiB:.1f} GiB after the {plan.target_kind} client's "
                                             "share: give the task more memory (the mount stack's task size) or run a smaller job"))
    return plan.without(skipped) if skipped else plan
