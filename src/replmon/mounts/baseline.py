"""Baselines and regressions for mount throughput, per (target, preset, job, direction).

The baseline is the median of the most recent earlier runs' bandwidth; its spread is the median
absolute deviation scaled by 1.4826 (MAD, the robust stand-in for one standard deviation under
normal noise). A result is a regression only when it is below the baseline by more than
``drop`` (a fraction: 0.2 = 20 %) **and** by more than ``k`` robust spreads: the first says the
drop matters, the second that it is not noise. Fewer than ``min_runs`` earlier runs is
"no baseline yet", never a pass.

>>> b = baseline([100.0, 102.0, 98.0, 101.0, 99.0])
>>> b.median, round(b.spread, 3), b.runs
(100.0, 1.483, 5)
>>> judge(75.0, b).verdict, judge(95.0, b).verdict
('regression', 'ok')
>>> judge(75.0, baseline([100.0, 99.0])).verdict
'no-baseline'
>>> judge(75.0, baseline([100.0, 60.0, 140.0, 70.0, 130.0])).verdict   # noisy: 25 % down is within 3 spreads
'ok'
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


def judge(value: float, base: Baseline, *, drop: float = DROP, k: float = K_SPREADS, min_runs: int = MIN_RUNS) -> Verdict:
    if base.runs < min_runs:
        return Verdict("no-baseline", value, base, None, f"{base.runs} earlier runs; a baseline needs {min_runs}")
    change = (value - base.median) / base.median if base.median else None
    below = base.median - value
    if change is not None and change < -drop and below > k * base.spread:
        return Verdict("regression", value, base, change,
                       f"{-change:.0%} below the median of {base.runs} runs (threshold {drop:.0%}) and "
                       f"{below / base.spread if base.spread else float('inf'):.1f} spreads (threshold {k:g})")
    why = "within the threshold" if change is None or change >= -drop else f"within {k:g} spreads (noise)"
    return Verdict("ok", value, base, change, why)
