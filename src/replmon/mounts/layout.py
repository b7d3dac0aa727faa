"""The files read jobs read, written once and kept on the target between runs.

Full-scale ``mountpoint-xregion`` reads 25 files per size, 112.2 GiB in all; writing them again
every run would cost a run's time and, cross-region, its transfer. So the runner lays them out
under ``replmon-fio/layout/<preset>/<scale>/`` on the target and records each file in that
directory's ``manifest.json``: its size and, on an S3 mount, its object's ETag (on a file
system, its size and modification time; replmon.mounts.runner.S3Stat). The next run reuses a file whose size and ETag (or
mtime) still match the manifest; anything else - missing, another size, an object someone
replaced - is deleted and written again, sequentially from offset 0 by one writer (what every
target, Mountpoint included, can hold).

>>> import tempfile, pathlib
>>> from replmon.mounts.presets import LayoutFile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> files = (LayoutFile("a.0", 4096), LayoutFile("a.1", 8192))
>>> ensure(files, d, FileStat(d)).written, ensure(files, d, FileStat(d)).reused
(2, 2)
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from replmon.mounts.presets import LayoutFile

MANIFEST = "manifest.json"
CHUNK = 8 * 1024 * 1024
WRITERS = 4  # files written at once (each file keeps one writer)


class Stat(Protocol):
    """What identifies a laid-out file's content on the target: (size, fingerprint) or None if absent."""

    def __call__(self, path: str) -> tuple[int, str] | None: ...


class FileStat:
    """A file system's view: size and mtime (ns)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, path: str) -> tuple[int, str] | None:
        try:
            st = os.stat(self.root / path)
        except FileNotFoundError:
            return None
        return st.st_size, f"mtime:{st.st_mtime_ns}"


@dataclass(frozen=True)
class LayoutResult:
    reused: int
    written: int
    bytes_written: int
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"reused": self.reused, "written": self.written, "bytes_written": self.bytes_written, "seconds": self.seconds}


def _write(path: Path, size: int, block: memoryview) -> None:
    with open(path, "wb") as out:
        left = size
        while left > 0:
            n = min(left, len(block))
            out.write(block[:n])
            left -= n


def ensure(files: tuple[LayoutFile, ...] | list[LayoutFile], directory: Path, stat: Stat) -> LayoutResult:
    """Reuse what still matches the manifest, (re)write the rest, then record the manifest."""
    import time

    t0 = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    manifest_path = directory / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    todo = []
    for f in files:
        have = stat(f.path)
        recorded = manifest.get(f.path)
        if have is not None and recorded == {"size": f.size, "id": have[1]} and have[0] == f.size:
            continue
        todo.append(f)
    block = memoryview(os.urandom(1024 * 1024) * (CHUNK // (1024 * 1024)))

    def write(f: LayoutFile) -> None:
        path = directory / f.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # Mountpoint replaces a file only by deleting it first (--allow-delete)
            path.unlink()
        _write(path, f.size, block)

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        list(pool.map(write, todo))  # list(): the first writer's error is raised here
    for f in todo:
        have = stat(f.path)
        if have is None or have[0] != f.size:
            raise OSError(f"layout {f.path}: wrote {f.size} bytes, the target reports {have}")
        manifest[f.path] = {"size": f.size, "id": have[1]}
    if todo or not manifest_path.exists():
        if manifest_path.exists():
            manifest_path.unlink()
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return LayoutResult(len(files) - len(todo), len(todo), sum(f.size for f in todo), time.monotonic() - t0)
