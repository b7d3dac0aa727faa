"""Baselines and regressions for mount throughput, per (target, preset, job, direction).

The baseline is the median of the most recent earlier runs' bandwidth; its spread is the median
absolute deviation scaled by 1.4826 (MAD, the robust stand-in for one standard deviation under
normal noise). A result is a regression only when it is below the baseline by more than
``drop`` (a fraction: 0.2 = 20 %) **and** by more than ``k`` robust spreads: the first says the
drop matters, the second that it is not noise. Fewer than ``min_runs`` earlier runs is
"no baseline yet", never a pass.

Throughput, a sustained level and a burst's duration are better higher; a latency is better
lower (``higher_is_better=False``: a regression is a rise by more than ``drop`` and ``k``
spreads).

>>> b = baseline([100.0, 102.0, 98.0, 101.0, 99.0])
>>> b.median, round(b.spread, 3), b.runs
(100.0, 1.483, 5)
>>> judge(75.0, b).verdict, judge(95.0, b).verdict
('regression', 'ok')
>>> judge(75.0, baseline([100.0, 99.0])).verdict
'no-baseline'
>>> judge(75.0, baseline([100.0, 60.0, 140.0, 70.0, 130.0])).verdict   # noisy: 25 % down is within 3 spreads
'ok'
>>> judge(0.004, baseline([0.002, 0.0021, 0.0019, 0.002, 0.002]), higher_is_better=False).verdict   # latency doubled
'regression'
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

#: Defaults; template.yaml's parameters FioRegressionDropPercent / FioBaselineRuns set the deployed ones.
MIN_RUNS = 5
WINDOW_RUNS = 10
DROP = 0.2
K_SPREADS = 3.0
MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Baseline:
    median: float
    spread: float  # 1.4826 x MAD
    runs: int


@dataclass(frozen=True)
class Verdict:
    verdict: str  # ok | regression | no-baseline
    value: float
    baseline: Baseline
    change: float | None  # (value - median) / median
    reason: str


def baseline(values: list[float], window: int = WINDOW_RUNS) -> Baseline:
    """From earlier runs, oldest first; only the last ``window`` count."""
    recent = values[-window:]
    if not recent:
        return Baseline(0.0, 0.0, 0)
    med = statistics.median(recent)
    mad = statistics.median([abs(v - med) for v in recent])
    return Baseline(med, MAD_TO_SIGMA * mad, len(recent))


def judge(value: float, base: Baseline, *, drop: float = DROP, k: float = K_SPREADS, min_runs: int = MIN_RUNS,
          higher_is_better: bool = True) -> Verdict:
    if base.runs < min_runs:
        return Verdict("no-baseline", value, base, None, f"{base.runs} earlier runs; a baseline needs {min_runs}")
    change = (value - base.median) / base.median if base.median else None
    sign = 1 if higher_is_better else -1  # worse is below for throughput, above for latency
    worse = sign * (base.median - value)
    worse_change = None if change is None else -sign * change
    if worse_change is not None and worse_change > drop and worse > k * base.spread:
        spreads = f"{worse / base.spread:.1f}" if base.spread else "all"
        return Verdict("regression", value, base, change,
                       f"{worse_change:.0%} {'below' if higher_is_better else 'above'} the median of {base.runs} runs "
                       f"(threshold {drop:.0%}) and {spreads} spreads (threshold {k:g})")
    why = "within the threshold" if worse_change is None or worse_change <= drop else f"within {k:g} spreads (noise)"
    return Verdict("ok", value, base, change, why)
