"""What a runner measures: a target's configuration, how to mount it, and how to be sure it is
unmounted afterwards.

Kinds (docs/DEPLOY.md says where each can run):
- ``mountpoint``: Mountpoint for S3 (``mount-s3``; the lab's build of its crates takes the same
  flags) on S3 Standard or Express One Zone, with ``cache`` (local dir) or ``cache_xz`` (a
  directory bucket); run in the foreground as the runner's child, so its lifetime is the run's.
- ``s3fs``: s3fs-fuse, foreground child, path-style for S3-compatible endpoints.
- ``nfs`` / ``lustre``: ``mount -t nfs|lustre`` (root; ECS on EC2 with SYS_ADMIN).
- ``efs`` / ``local``: already mounted (a Fargate EFS volume, a directory): nothing to mount.

>>> t = Target.from_json({"name": "std", "kind": "mountpoint", "bucket": "b", "region": "us-east-1",
...                       "mount_point": "/mnt/t", "cache": "/tmp/c"})
>>> t.mount_argv()
['mount-s3', 'b', '/mnt/t', '--foreground', '--allow-delete', '--region', 'us-east-1', '--cache', '/tmp/c']
>>> Target.from_json({"name": "x", "kind": "nfs", "mount_point": "/mnt/n"})
Traceback (most recent call last):
...
replmon.mounts.targets.TargetError: target x: nfs needs "source" (e.g. "fs-1.example:/export")
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from replmon.core.names import check_name
from replmon.mounts.presets import TARGET_KINDS

FOREGROUND_KINDS = frozenset({"mountpoint", "s3fs"})  # a FUSE daemon the runner owns as a child
KERNEL_KINDS = frozenset({"nfs", "lustre"})
PREMOUNTED_KINDS = frozenset({"efs", "local"})
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
            raise TargetError(f"target {name}: \"mount_point\" is required (the directory fio runs in)")
        if kind in ("mountpoint", "s3fs") and not raw.get("bucket"):
            raise TargetError(f'target {name}: {kind} needs "bucket"')
        if kind in KERNEL_KINDS and not raw.get("source"):
            example = "fs-1.example:/export" if kind == "nfs" else "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"
            raise TargetError(f'target {name}: {kind} needs "source" (e.g. "{example}")')
        if (raw.get("cache") or raw.get("cache_xz")) and kind != "mountpoint":
            raise TargetError(f'target {name}: "cache"/"cache_xz" are Mountpoint options; kind is {kind}')
        return cls(**{**raw, "options": tuple(raw.get("options", ())), "env": dict(raw.get("env", {}))})

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
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.unmount_error = self.unmount_error or f"{t.kind} daemon did not exit after unmount: killed"
