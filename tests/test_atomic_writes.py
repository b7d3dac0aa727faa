"""Writes are whole or not at all: the lab's session files, the mount charts and the
bench / lab-fio reports go through ``core.files.write_atomic`` (a temporary file in the same
folder, fsync, rename, owner-only unless said), so a full disk leaves the old file or none -
never a zero-byte or half-written one, never a stray temporary file."""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture
def disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fsync fails as on a full disk (the data is written to the page cache, then refused)."""
    def refuse(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("replmon.core.files.os.fsync", refuse)


def left(folder: Path) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_size) for p in folder.iterdir())


def test_the_lab_session_files_are_owner_only_and_never_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replmon.lab import session

    target = tmp_path / session.SECRET
    session._private(target, "old\n")
    assert target.read_text() == "old\n" and oct(target.stat().st_mode & 0o777) == "0o600"

    def refuse(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("replmon.core.files.os.fsync", refuse)
    with pytest.raises(OSError) as exc:
        session._private(target, "new\n")
    assert exc.value.errno == errno.ENOSPC
    assert left(tmp_path) == [(session.SECRET, 4)] and target.read_text() == "old\n"  # the old file, whole; no temp left
    with pytest.raises(OSError):
        session._private(tmp_path / session.STATE, "{}")
    assert left(tmp_path) == [(session.SECRET, 4)]  # a new file is not created empty


def test_a_mount_chart_is_written_whole_or_not_at_all(tmp_path: Path, disk_full: None) -> None:
    from replmon.mounts.charts import chart

    with pytest.raises(OSError):
        chart("nfs-matrix", [], tmp_path / "nfs-matrix.png")
    assert left(tmp_path) == []


def test_a_mount_chart_is_a_png_readable_by_all(tmp_path: Path) -> None:
    from replmon.mounts.charts import chart

    path = chart("nfs-matrix", [], tmp_path / "charts" / "nfs-matrix.png")
    assert path.read_bytes()[:4] == b"\x89PNG" and oct(path.stat().st_mode & 0o777) == "0o644"
    assert left(path.parent) == [("nfs-matrix.png", path.stat().st_size)]


def test_the_lab_fio_report_keeps_the_old_file_when_the_disk_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from replmon.lab.mounts import write_markdown

    md = write_markdown(tmp_path / "LAB-MOUNTS.md", "nfs-matrix", "first")
    before = md.read_text()
    assert "first" in before

    def refuse(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("replmon.core.files.os.fsync", refuse)
    with pytest.raises(OSError):
        write_markdown(md, "nfs-matrix", "second")
    assert md.read_text() == before and left(tmp_path) == [("LAB-MOUNTS.md", len(before.encode()))]


#: Files written in place on purpose: scratch data of a benchmark, logs and locks (appended or
#: never read back as a whole). Everything else replmon
#: writes (records, run files, charts, reports, session files) must go through write_atomic.
IN_PLACE = {
    ("lab/mountbench.py", "job.fio"): "the bench's scratch job file in its temporary directory",
    ("lab/bench.py", "plain_file.open"): "P3's scratch data file, removed after the run",
    ("lab/lab.py", "os.O_RDWR | os.O_CREAT"): "the lab directory's lock file",
    ("lab/servers.py", "O_APPEND"): "a server's log, appended",
    ("lab/servers.py", 'os.fdopen(fd, "ab")'): "the same log",
    ("lab/session.py", 'log.open("ab")'): "the supervisor's log, appended",
    ("lab/session.py", '.lock").open("a+")'): "the lab directory's lock file",
    ("mounts/targets.py", '"ab"'): "a mount's log, appended",
    ("mounts/runner.py", "jobfile.write_text"): "fio's job file in the run's scratch directory",
    ("mounts/layout.py", '"wb"'): "the benchmark's data files on the mount under test",
    ("mounts/layout.py", "manifest_path.write_text"): "the data layout's manifest on the mount under test",
}
WRITE = re.compile(r"write_text\(|write_bytes\(|savefig\((?!buf)|\.open\(\"[wa]|open\([^)]*\"[wa]b?\"|os\.O_CREAT")


def test_replmon_writes_its_files_through_write_atomic() -> None:
    """A source scan: every in-place write in replmon is one of IN_PLACE (the bench reports, the
    mount charts and the session files used to be written in place)."""
    src = ROOT / "src" / "replmon"
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == "core/files.py":
            continue
        for line in path.read_text().splitlines():
            if WRITE.search(line) and not line.lstrip().startswith("#"):
                allowed = [k for k in IN_PLACE if k[0] == rel and k[1] in line]
                if not allowed:
                    found.append(f"{rel}: {line.strip()}")
    assert found == [], "write these through replmon.core.files.write_atomic (or say why not in IN_PLACE):\n" + "\n".join(found)
