"""A server's clock, read from the ``Date`` header of one HeadBucket (core/skew.py judges it).

Whatever the answer, it carries the header: a 403 (``RequestTimeTooSkewed`` when the prober's clock
is past S3's 15 minutes, or AccessDenied) as much as a 200, so the skew is measured even when the
clock is already too far off for S3 to accept anything."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from replmon.core.skew import Skew, judge


def server_skew(client: Any, bucket: str, server: str, clock: Callable[[], float] = time.time) -> Skew | None:
    """The prober's clock minus the server's, or None if the server did not answer with a date
    (unreachable: preflight names that)."""
    t0 = clock()
    try:
        meta = client.head_bucket(Bucket=bucket).get("ResponseMetadata", {})
    except ClientError as exc:
        meta = exc.response.get("ResponseMetadata", {})
    except Exception:
        return None
    t1 = clock()
    date = (meta.get("HTTPHeaders") or {}).get("date")
    if not date:
        return None
    try:
        return judge((t0 + t1) / 2, str(date), server)
    except ValueError:
        return None
