"""Memory preflight: a job whose fio buffers would not fit the task's memory is skipped with the
reason stored, instead of the kernel's OOM killer ending the task with nothing recorded.

fio fills one block per request in flight per thread (``FioJob.buffer_bytes``): SEQ8M-Q128T16
on a 3 GiB file is 16 x 128 x 8 MiB = 16 GiB. Stonewalled jobs run one at a time, so a plan needs
its largest job's buffers at once. The limit is the smaller of the ECS task's ``Limits.Memory``
(MiB; task metadata endpoint v4, "Amazon ECS task metadata V4 JSON response": "the resource
limits specified at the task level") and the container's cgroup (``memory.max``, cgroup v2;
``memory.limit_in_bytes``, v1), else the machine's memory. On ECS on EC2 a task-level limit is
kept on the task's cgroup, a level above the container's, whose own ``memory.max`` may read
``max``: the host's MemTotal would then pass for the limit. What the mount's own client holds
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
NO_LIMIT = 2**60
MOUNTPOINT_MIN_TARGET_MIB = 512  # Mountpoint's CONFIGURATION.md: "with a minimum of 512 MiB"  # cgroup v1 writes a huge number for "unlimited"


TASK_METADATA = "the ECS task's Limits.Memory (task metadata v4)"


def memory_limit(cgroup_files: tuple[str, ...] = CGROUP_FILES, meminfo: str = "/proc/meminfo", *,
                 task_memory_mib: float | None = None) -> tuple[int, str]:
    """(bytes, where it came from): the smaller of the task's and the cgroup's limits, else MemTotal.

    >>> memory_limit((), task_memory_mib=114688)
    (120259084288, "the ECS task's Limits.Memory (task metadata v4)")
    """
    found: list[tuple[int, str]] = []
    if task_memory_mib:
        found.append((int(task_memory_mib * 2**20), TASK_METADATA))
    for f in cgroup_files:
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT:
            found.append((int(text), f))
            break
    if found:
        return min(found)
    for line in Path(meminfo).read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024, meminfo
    raise OSError(f"no memory limit in {', '.join(cgroup_files)} and no MemTotal in {meminfo}")


def mountpoint_memory_target(limit: int, help_text: str) -> tuple[str, ...]:
    """Mountpoint's flags holding it to the share the preflight leaves it: ``--memory-target``
    (MiB, at least 512) = FUSE_RESERVE x the limit, when its ``--help`` lists the flag
    (Mountpoint 1.24.0 on; the image pins 1.23.0, which has no such flag; doc/CONFIGURATION.md, "Configuring memory usage": "--memory-target defaults
    to 95% of total (or cgroup-limited) memory", which would leave fio nothing); else none.

    >>> mountpoint_memory_target(16 * GiB, "  --memory-target <MiB>  Target ..."), mountpoint_memory_target(GiB, "--memory-target")
    (('--memory-target', '4096'), ('--memory-target', '512'))
    >>> mountpoint_memory_target(16 * GiB, "  --cache <DIR>")
    ()
    """
    if "--memory-target" not in help_text:
        return ()
    return ("--memory-target", str(max(MOUNTPOINT_MIN_TARGET_MIB, int(limit * FUSE_RESERVE) // 2**20)))


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
