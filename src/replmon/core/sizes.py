"""Object sizes as people write them: ``"10MiB"``, ``"1GiB"``, ``"1.5GB"``, ``4096``.

>>> parse_size("10MiB")
10485760
>>> format_size(10485760)
'10MiB'
"""

from __future__ import annotations

import re

_UNITS: dict[str, int] = {
    "": 1,
    "B": 1,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
    "TIB": 1024**4,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    # Bare K/M/G/T follow `aws s3` and fio: binary multiples.
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
    "T": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
ACCEPTED_FORM = "a byte count (4096) or a number with a unit: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB (e.g. '10MiB', '1.5GiB')"

#: S3's largest object (5 TiB).
MAX_OBJECT_BYTES = 5 * 1024**4


class SizeError(ValueError):
    """A size string that cannot be read; the message says the accepted form."""


def parse_size(value: str | int) -> int:
    """Bytes in ``value``; raises :class:`SizeError` naming the accepted form."""
    if isinstance(value, bool):
        raise SizeError(f"{value!r} is not a size; use {ACCEPTED_FORM}")
    if isinstance(value, int):
        n = value
    else:
        match = _SIZE_RE.match(str(value))
        if not match:
            raise SizeError(f"{value!r} is not a size; use {ACCEPTED_FORM}")
        number, unit = match.groups()
        factor = _UNITS.get(unit.upper())
        if factor is None:
            raise SizeError(f"unknown size unit {unit!r} in {value!r}; use {ACCEPTED_FORM}")
        n = round(float(number) * factor)
    if n < 1:
        raise SizeError(f"size {value!r} must be at least 1 byte")
    if n > MAX_OBJECT_BYTES:
        raise SizeError(f"size {value!r} is above S3's 5 TiB object limit")
    return n


def format_size(n: int) -> str:
    """Shortest exact binary form: 10485760 -> '10MiB', 1536 -> '1536B' unless exact."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2)):
        if n >= factor and (n * 10) % factor == 0:
            return f"{n / factor:g}{unit}"
    return f"{n}B"
