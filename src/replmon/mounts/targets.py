"""What a runner measures: a target's configuration, how to mount it, and how to be sure it is
unmounted afterwards.

Kinds (docs/DEPLOY.md says where each can run):
- ``mountpoint``: Mountpoint for S3 (``mount-s3``; the lab's build of its crates takes the same
  flags) on S3 Standard or Express One Zone, with ``cache`` (local dir) or ``cache_xz`` (a
  directory bucket); run in the foreground as the runner's child, so its lifetime is the run's.
- ``s3fs``: s3fs-fuse, foreground child, path-style for S3-compatible endpoints.
- ``nfs`` / ``lustre``: ``mount -t nfs|lustre`` (root; ECS on EC2 with SYS_ADMIN). NFS mounts
  with ``nconnect=16`` unless ``options`` say otherwise (the NFS study's only option, R5); Lustre
  with the FSx for Lustre study's client options ``noatime,flock`` (R4's fstab line). What the
  kernel actually mounted (the NFS version and nconnect it negotiated) is read back from
  /proc/self/mounts and recorded with the run (:func:`mounted_options`).
- ``efs`` / ``local``: already mounted (a Fargate EFS volume, a directory, a gp3 volume on the
  host for the EBS row): nothing to mount.

A target in a list (``REPLMON_FIO_TARGETS``) also names its ``preset`` (and optionally ``scale``);
``file_system_id`` lets the runner read the file system's own CloudWatch metrics for the run
window (FSx for Lustre: AWS/FSx; EFS: AWS/EFS); ``per_unit_mb_s`` and ``storage_gib`` give the
per-unit baseline a burst is compared with (FSx for Lustre: PerUnitStorageThroughput x capacity).

>>> t = Target.from_json({"name": "std", "kind": "mountpoint", "bucket": "b", "region": "us-east-1",
...                       "mount_point": "/mnt/t", "cache": "/tmp/c"})
>>> t.mount_argv()
['mount-s3', 'b', '/mnt/t', '--foreground', '--allow-delete', '--region', 'us-east-1', '--prefix', 'replmon-fio/', '--cache', '/tmp/c']
>>> Target.from_json({"name": "x", "kind": "nfs", "mount_point": "/mnt/n"})
Traceback (most recent call last):
...
replmon.mounts.targets.TargetError: target x: nfs needs "source" (e.g. "fs-1.example:/export")
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from replmon.core.names import check_name
from replmon.mounts.presets import TARGET_KINDS

FOREGROUND_KINDS = frozenset({"mountpoint", "s3fs"})  # a FUSE daemon the runner owns as a child
KERNEL_KINDS = frozenset({"nfs", "lustre"})
PREMOUNTED_KINDS = frozenset({"efs", "local"})
#: What a kernel mount gets when the target names no options: the studies' own (R5, R4).
DEFAULT_OPTIONS: dict[str, tuple[str, ...]] = {"nfs": ("nconnect=16",), "lustre": ("noatime", "flock")}
#: Mountpoint mounts the bucket's replmon-fio/ prefix unless told otherwise: every request it makes
#: (its start-up listing, lookups, reads and writes) stays under the prefix the task role may use.
DEFAULT_MOUNTPOINT_PREFIX = "replmon-fio/"
DEFAULT_MOUNT_ROOT = "/mnt/replmon"  # a target the runner mounts goes to <root>/<name> unless it says otherwise
MOUNT_TIMEOUT_S = 30.0
UNMOUNT_TIMEOUT_S = 30.0


class TargetError(ValueError):
    """A target configuration that cannot be mounted as written."""


@dataclass(frozen=True)
class Target:
    name: str
    kind: str
    mount_point: str
    bucket: str | None = None
    prefix: str = ""
    region: str | None = None
    endpoint_url: str | None = None
    cache: str | None = None  # Mountpoint --cache DIR
    cache_xz: str | None = None  # Mountpoint --cache-xz DIRECTORY_BUCKET
    source: str | None = None  # nfs "host:/export", lustre "dns@tcp:/mountname"
    options: tuple[str, ...] = ()  # extra mount options / flags, recorded with every result
    binary: str | None = None  # mount-s3 by default; the lab points at its build
    env: dict[str, str] = field(default_factory=dict)  # e.g. credentials for the lab's MinIO (never recorded)
    preset: str | None = None  # in a target list: what this target runs
    scale: str | None = None  # in a target list: overrides REPLMON_FIO_SCALE for this target
    file_system_id: str | None = None  # fs-... (FSx for Lustre, EFS): its CloudWatch metrics are collected
    per_unit_mb_s: float | None = None  # FSx for Lustre PerUnitStorageThroughput (MB/s per TiB)
    storage_gib: float | None = None  # FSx for Lustre StorageCapacity (GiB)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Target:
        name = raw.get("name")
        try:  # it names metrics, results and (mounts branch) the default mount point: never '..'
            check_name(name, "efs-standard")
        except ValueError as exc:
            raise TargetError(f'target: "name" {exc} (it names metrics and results)') from None
        kind = raw.get("kind")
        if kind not in TARGET_KINDS:
            raise TargetError(f"target {name}: \"kind\" {kind!r} must be one of {', '.join(TARGET_KINDS)}")
        known = set(cls.__dataclass_fields__)
        unknown = set(raw) - known
        if unknown:
            raise TargetError(f"target {name}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
        if not raw.get("mount_point"):
            if kind in PREMOUNTED_KINDS:
                raise TargetError(f"target {name}: \"mount_point\" is required for {kind} (the directory fio runs in)")
            raw = {**raw, "mount_point": f"{DEFAULT_MOUNT_ROOT}/{name}"}
        if kind in ("mountpoint", "s3fs") and not raw.get("bucket"):
            raise TargetError(f'target {name}: {kind} needs "bucket"')
        if kind in KERNEL_KINDS and not raw.get("source"):
            example = "fs-1.example:/export" if kind == "nfs" else "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"
            raise TargetError(f'target {name}: {kind} needs "source" (e.g. "{example}")')
        if (raw.get("cache") or raw.get("cache_xz")) and kind != "mountpoint":
            raise TargetError(f'target {name}: "cache"/"cache_xz" are Mountpoint options; kind is {kind}')
        if kind == "mountpoint" and "prefix" not in raw:
            raw = {**raw, "prefix": DEFAULT_MOUNTPOINT_PREFIX}
        if kind == "mountpoint" and raw.get("prefix") and not str(raw["prefix"]).endswith("/"):  # Mountpoint refuses it at mount
            raise TargetError(f'target {name}: "prefix" {raw["prefix"]!r} must end with "/" (Mountpoint --prefix), e.g. "{raw["prefix"]}/"')
        options = raw.get("options")
        if isinstance(options, str):
            options = [o for o in options.split(",") if o]
        if options is None or (not options and kind in DEFAULT_OPTIONS and "options" not in raw):
            options = DEFAULT_OPTIONS.get(kind, ())
        if kind == "lustre" and any(o.startswith(("nconnect", "nfsvers", "vers=")) for o in options):
            raise TargetError(f"target {name}: {', '.join(options)} are NFS options; Lustre takes its own (e.g. noatime,flock)")
        for num in ("per_unit_mb_s", "storage_gib"):
            if raw.get(num) is not None and not (isinstance(raw[num], int | float) and raw[num] > 0):
                raise TargetError(f'target {name}: "{num}" must be a positive number')
        return cls(**{**raw, "options": tuple(options), "env": dict(raw.get("env", {}))})

    def with_flags(self, flags: tuple[str, ...]) -> Target:
        """This target with a preset's extra flags (e.g. Mountpoint's --allow-overwrite) added."""
        return self if not flags else replace(self, options=(*self.options, *(f for f in flags if f not in self.options)))

    def baseline_mb_s(self) -> float | None:
        """The per-unit baseline throughput, MB/s: MB/s per TiB x TiB (the FSx study's 117 MB/s for 2.4 TiB at 50)."""
        if self.per_unit_mb_s and self.storage_gib:
            return self.per_unit_mb_s * self.storage_gib / 1024
        return None

    def metrics_namespace(self) -> str | None:
        """Where the file system publishes its own throughput, if it is an AWS one we know."""
        if not self.file_system_id:
            return None
        if self.kind == "lustre":
            return "AWS/FSx"
        if self.kind == "efs" or (self.kind == "nfs" and ".efs." in (self.source or "")):
            return "AWS/EFS"
        return None

    def describe(self) -> dict[str, Any]:
        """What is recorded with every result (never ``env``)."""
        d = asdict(self)
        d.pop("env")
        d["options"] = list(self.options)
        return d

    def mount_argv(self) -> list[str] | None:
        if self.kind == "mountpoint":
            argv = [self.binary or "mount-s3", str(self.bucket), self.mount_point, "--foreground", "--allow-delete"]
            if self.region:
                argv += ["--region", self.region]
            if self.endpoint_url:
                argv += ["--endpoint-url", self.endpoint_url, "--force-path-style"]
            if self.prefix:
                argv += ["--prefix", self.prefix]
            if self.cache:
                argv += ["--cache", self.cache]
            if self.cache_xz:
                argv += ["--cache-xz", self.cache_xz]
            return argv + list(self.options)
        if self.kind == "s3fs":
            opts = list(self.options)  # s3fs keeps no local cache unless use_cache= is given
            bucket = f"{self.bucket}:/{self.prefix}" if self.prefix else str(self.bucket)
            argv = [self.binary or "s3fs", bucket, self.mount_point, "-f"]
            if self.endpoint_url:
                argv += ["-o", f"url={self.endpoint_url}", "-o", "use_path_request_style"]
            if self.region:
                argv += ["-o", f"endpoint={self.region}"]
            return argv + opts
        if self.kind in KERNEL_KINDS:
            argv = ["mount", "-t", self.kind]
            if self.options:
                argv += ["-o", ",".join(self.options)]
            return [*argv, str(self.source), self.mount_point]
        return None  # efs, local: already there


def mounted_options(path: str, mounts: str = "/proc/self/mounts") -> tuple[str, str] | None:
    """(fstype, options) of the mount at ``path`` as the kernel reports it (for NFS: the
    version and nconnect it negotiated), or None if nothing is mounted there.

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", delete=False)
    >>> _ = f.write("fs:/e /mnt/n nfs4 rw,relatime,vers=4.1,rsize=1048576,nconnect=16,proto=tcp 0 0\\n"); f.close()
    >>> mounted_options("/mnt/n", f.name), nfs_negotiated("rw,vers=4.1,nconnect=16")
    (('nfs4', 'rw,relatime,vers=4.1,rsize=1048576,nconnect=16,proto=tcp'), {'vers': '4.1', 'nconnect': 16})
    >>> os.unlink(f.name)
    """
    real = os.path.realpath(path)
    found = None
    with open(mounts) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[1].replace("\\040", " ") == real:
                found = (parts[2], parts[3])  # the last one stacked on the path is the one in effect
    return found


def nfs_negotiated(options: str) -> dict[str, Any]:
    """vers= and nconnect= from an NFS mount's options (nconnect is absent when it is 1)."""
    opts: dict[str, str] = {}
    for o in options.split(","):
        k, _, v = o.partition("=")
        opts[k] = v
    return {"vers": opts.get("vers"), "nconnect": int(opts.get("nconnect", "1"))}


def is_mounted(path: str) -> bool:
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == real for line in f)


class Mounted:
    """Context manager: mount on enter; on exit always unmount and wait for the daemon to go."""

    def __init__(self, target: Target, log_path: str) -> None:
        self.target = target
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.unmount_error: str | None = None

    def __enter__(self) -> Mounted:
        t = self.target
        os.makedirs(t.mount_point, exist_ok=True)
        if t.cache:
            os.makedirs(t.cache, exist_ok=True)
        argv = t.mount_argv()
        if argv is None:
            if not os.path.isdir(t.mount_point):
                raise TargetError(f"target {t.name}: {t.mount_point} is not a directory")
            return self
        if is_mounted(t.mount_point):
            raise TargetError(f"target {t.name}: {t.mount_point} is already a mount point; unmount it or pick another")
        env = {**os.environ, **t.env}
        with open(self.log_path, "ab") as log:
            if t.kind in FOREGROUND_KINDS:
                self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            else:
                subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, check=True, timeout=MOUNT_TIMEOUT_S)
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not is_mounted(t.mount_point):
            if self.proc is not None and self.proc.poll() is not None:
                raise TargetError(f"target {t.name}: {argv[0]} exited {self.proc.returncode} before mounting: {self._log_tail()}")
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise TargetError(f"target {t.name}: not mounted after {MOUNT_TIMEOUT_S:.0f} s: {self._log_tail()}")
            time.sleep(0.05)
        return self

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-400:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def __exit__(self, *exc: object) -> None:
        t = self.target
        if t.mount_argv() is None:
            return
        deadline = time.monotonic() + UNMOUNT_TIMEOUT_S
        while is_mounted(t.mount_point) and time.monotonic() < deadline:
            # umount as root; fusermount for an unprivileged FUSE mount. A busy mount is retried.
            for argv in (["umount", t.mount_point], ["fusermount3", "-u", t.mount_point], ["fusermount", "-u", t.mount_point]):
                try:
                    if subprocess.run(argv, capture_output=True, timeout=10).returncode == 0:
                        break
                except (OSError, subprocess.TimeoutExpired):
                    continue
            else:
                time.sleep(0.5)
        if is_mounted(t.mount_point):
            subprocess.run(["umount", "-l", t.mount_point], capture_output=True, timeout=10)
            self.unmount_error = f"{t.mount_point} was still mounted after {UNMOUNT_TIMEOUT_S:.0f} s: lazily unmounted"
        if self.proc is not None:
            try:  # the daemon ends its last requests after the unmount: on a loaded machine that can take seconds
                self.proc.wait(timeout=max(10.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.unmount_error = self.unmount_error or f"{t.kind} daemon did not exit after unmount: killed"
