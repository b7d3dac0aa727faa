"""The prober's clock against a server's: a record's times come from the prober's clock, so a clock
that is minutes off stamps records a report from a correct clock reads as outside its window.

The server's clock is its HTTP ``Date`` header (whole seconds), read around one request; the
prober's is the midpoint of that request. Past :data:`WARN_SECONDS` a run warns; past
:data:`S3_MAX_SKEW_SECONDS`, the 15 minutes S3 allows between a signed request's time and its own
(beyond it S3 answers 403 RequestTimeTooSkewed), nothing a run signs would be accepted: it is
refused with the reason.

>>> s = judge(1_795_000_600.5, "Wed, 18 Nov 2026 11:06:40 GMT", "source http://127.0.0.1:9000")
>>> s.verdict, round(s.seconds)
('warn', 600)
>>> s.message()  # doctest: +ELLIPSIS
"clock skew: this machine's clock is 600 s ahead of source http://127.0.0.1:9000's (its Date header); ..."
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime

#: Beyond this, a run warns: records are stamped with a clock this far off.
WARN_SECONDS = 30.0
#: S3's limit between a signed request's time and its own clock (RequestTimeTooSkewed beyond it).
S3_MAX_SKEW_SECONDS = 15 * 60.0


@dataclass(frozen=True)
class Skew:
    seconds: float  # the prober's clock minus the server's: positive when the prober is ahead
    server: str

    @property
    def verdict(self) -> str:
        """'ok', 'warn' (past WARN_SECONDS) or 'refuse' (past S3's 15 minutes)."""
        off = abs(self.seconds)
        return "refuse" if off > S3_MAX_SKEW_SECONDS else "warn" if off > WARN_SECONDS else "ok"

    def message(self) -> str:
        side = "ahead of" if self.seconds > 0 else "behind"
        head = f"clock skew: this machine's clock is {abs(self.seconds):.0f} s {side} {self.server}'s (its Date header); "
        if self.verdict == "refuse":
            return head + (f"S3 refuses signed requests more than {S3_MAX_SKEW_SECONDS / 60:.0f} minutes off "
                           "(RequestTimeTooSkewed): set this machine's clock (NTP) and run again")
        return head + (f"records are stamped with it, so a report from a correct clock finds them {abs(self.seconds):.0f} s "
                       f"{'later' if self.seconds > 0 else 'earlier'} than they were; set this machine's clock (NTP)")

    def to_json(self) -> dict[str, object]:
        return {"seconds": round(self.seconds, 3), "server": self.server, "verdict": self.verdict}


def judge(local_mid: float, date_header: str, server: str) -> Skew:
    """The skew from a request's local midpoint and the server's ``Date`` header. The header has whole
    seconds: its second's middle is the best estimate (within 0.5 s, plus half the request's time).
    ValueError if the header is not an HTTP date."""
    try:
        server_time = parsedate_to_datetime(date_header).timestamp()
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"not an HTTP date: {date_header!r}") from exc
    return Skew(local_mid - (server_time + 0.5), server)
