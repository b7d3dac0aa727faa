"""dd's transfer summary (GNU coreutils), as the express-vs-standard study measured with it.

dd prints ``<bytes> bytes (...) copied, <seconds> s, <rate>`` on stderr; the rate it prints is
rounded to 2-3 digits, so bandwidth is computed from the exact byte count and the seconds it
printed (which dd prints to about 4 significant digits).

>>> parse_dd("100+0 records in\\n100+0 records out\\n104857600 bytes (105 MB, 100 MiB) copied, 0.5 s, 210 MB/s\\n")
DdResult(bytes=104857600, seconds=0.5, bw_bytes=209715200.0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from replmon.mounts.fioresult import FioResultError

_SUMMARY = re.compile(r"^(\d+) bytes .*copied, ([0-9.]+(?:e-?\d+)?) s, ", re.MULTILINE)


@dataclass(frozen=True)
class DdResult:
    bytes: int
    seconds: float
    bw_bytes: float


def parse_dd(stderr: str) -> DdResult:
    m = _SUMMARY.search(stderr)
    if not m:
        raise FioResultError(f"dd: no transfer summary in its output ({stderr.strip()[-200:]!r}); did dd fail?")
    n, s = int(m.group(1)), float(m.group(2))
    if s <= 0:
        raise FioResultError(f"dd: printed {s} s for {n} bytes; the rate is unknown")
    return DdResult(n, s, n / s)
