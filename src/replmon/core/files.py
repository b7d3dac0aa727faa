"""Files replmon writes (spool records, run files, charts, pidfiles): whole or not at all.

:func:`write_atomic` writes a temporary file beside the target (exclusive create, owner-only mode),
fsyncs it, renames it over the target and fsyncs the folder. A reader sees the old file or the
whole new one; a full disk (ENOSPC) or any other error removes the temporary file and raises, so
no empty or partial file is ever left behind.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> write_atomic(d / "x.json", b"{}").read_bytes(), sorted(p.name for p in d.iterdir())
(b'{}', ['x.json'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: errno values that mean "the disk (or the quota) is full": said as such to the operator.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def disk_full(exc: BaseException) -> bool:
    """Is this the error of a full disk or an exhausted quota?"""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL


def describe_os_error(exc: BaseException, path: Path | str | None = None) -> str:
    """An OS error in one line with its errno name and path: a full disk reads
    'ENOSPC (disk full): /lab/spool/r/x.json', wherever it happened.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device"), "/lab/spool")
    'ENOSPC (disk full): /lab/spool'
    """
    if not isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc}"
    name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    what = "disk full" if disk_full(exc) else (exc.strerror or str(exc))
    where = exc.filename if exc.filename is not None else path
    return f"{name} ({what})" + (f": {where}" if where is not None else "")


#: Below this much free space a file system is named full: the lab's servers (MinIO, DynamoDB Local)
#: and the spool write small files, and fail before the last byte is used.
LOW_SPACE_BYTES = 16 * 1024 * 1024


def low_space(path: Path | str, statvfs: Callable[[str], Any] = os.statvfs) -> str | None:
    """A line naming the file system holding ``path`` as full, or None when it has room (or cannot
    be read). A run that failed for a cause a server only hints at ("the execution did not
    succeed", a 500 from the store) gets the plain reason.

    >>> from types import SimpleNamespace
    >>> low_space("/lab", lambda p: SimpleNamespace(f_bavail=3, f_frsize=4096, f_blocks=2560))
    'ENOSPC (disk full): /lab: 12288 bytes free of 10.0 MiB; free some space (or choose another --dir) and run again'
    """
    try:
        st = statvfs(str(path))
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= LOW_SPACE_BYTES:
        return None
    return (f"ENOSPC (disk full): {path}: {free} bytes free of {st.f_blocks * st.f_frsize / 2**20:.1f} MiB; "
            "free some space (or choose another --dir) and run again")


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> Path:
    """Write ``data`` to ``path`` atomically (see the module's docstring); returns ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        exc.filename = str(path)  # the target, not the temporary name
        raise
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a write's ENOSPC names no file: name the target
            exc.filename = str(path)
        raise
    with contextlib.suppress(OSError):  # the rename itself survives a crash once the folder is synced
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return path
