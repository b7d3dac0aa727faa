"""replmon's defaults, read from ``defaults.json``: the one place they are defined.

template.yaml's parameter defaults, :mod:`replmon.probe.request` and the CLI flags use these values
(tests/test_defaults.py checks the template against them).

>>> DEFAULTS.timeout_seconds, DEFAULTS.target_seconds
(7200, 900.0)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PollDefaults:
    floor_seconds: float
    relative: float
    inline_budget_seconds: float
    use_history: bool


@dataclass(frozen=True)
class Defaults:
    sizes: str
    trials: int
    timeout_seconds: int  # a probe still PENDING this long after its PUT is STUCK
    target_seconds: float  # RTC's promise: 99.99 % within 15 minutes
    max_concurrency: int
    poll: PollDefaults
    poll_function_timeout_seconds: int  # PollReplication's Lambda timeout: bounds the inline budget
    schedule_rate_minutes: int
    retention_days: int
    route_name: str
    probe_prefix: str
    seed_prefix: str
    spool_prefix: str
    slo_target: float  # the SLO: this share of probes within target_seconds (RTC's 99.99 %)
    slo_period_days: int  # the error budget's period
    rpo_window_seconds: int  # how far back the RPO looks at probes, events and RTC metrics
    event_clock_skew_seconds: float  # allowance between S3's event clock and Lambda's (signals/arrivals.py)
    collector_rate_minutes: int  # CollectSignals' schedule
    pending_bytes_alarm: int  # the RTC BytesPendingReplication alarm's threshold


def _load() -> Defaults:
    raw: dict[str, Any] = json.loads(Path(__file__).with_name("defaults.json").read_text())  # a file of the package
    raw.pop("_comment", None)
    poll = PollDefaults(**raw.pop("poll"))
    raw["target_seconds"] = float(raw["target_seconds"])
    return Defaults(poll=poll, **raw)


DEFAULTS = _load()
