"""Issue 19.5: an SLO its sample can support - the budget in bad samples, refused or warned when
thin, and window labels that say the window really used (signals/slo.py, docs/SEMANTICS.md).

The target's default and meaning follow "Meeting compliance requirements with S3 Replication Time
Control" (aws-contracts.md C19.5: the S3 User Guide says 99.9 % in places and 99.99 % in others,
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-time-control.html): replmon's
default is 99.9 %, and a target the probe count cannot support is refused, whatever RTC promises.
"""

from __future__ import annotations

import pytest

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.record import ProbeStatus
from replmon.signals.collector import collect_step, probes_per_run
from replmon.signals.slo import REFUSE_BELOW_EVENTS, SloSpec, check_budget, expected_judged, slo_spec, slo_status
from replmon.wiring import Deps


def default_spec() -> SloSpec:
    return slo_spec({"target_percent": DEFAULTS.slo_target * 100, "period_days": DEFAULTS.slo_period_days,
                     "probe_interval_minutes": DEFAULTS.schedule_rate_minutes})


def test_the_stacks_default_is_accepted_with_a_warning_that_states_the_budget() -> None:
    spec = default_spec()
    n = probes_per_run({})
    assert n == 3 and expected_judged(spec, n) == 8640
    warning = check_budget(spec, n)
    assert warning is not None and "8640 judged probes per 30 days is an error budget of 8.64 bad probes" in warning
    assert "SloTargetPercent" in warning


def test_a_target_the_sample_cannot_support_is_refused_naming_the_field_and_the_fix() -> None:
    spec = slo_spec({"target_percent": 99.99, "period_days": 30, "probe_interval_minutes": 15})
    with pytest.raises(ConfigError) as info:
        check_budget(spec, 3)
    text = str(info.value)
    assert "SloTargetPercent: 99.99 % over 8640 judged probes per 30 days is an error budget of 0.86 bad probes" in text
    assert "lower SloTargetPercent to at most 99.94" in text
    # The fix it names is accepted.
    assert REFUSE_BELOW_EVENTS <= (1 - 0.9994) * 8640
    check_budget(slo_spec({"target_percent": 99.94, "period_days": 30, "probe_interval_minutes": 15}), 3)
    # A generous sample needs no warning at all.
    assert check_budget(slo_spec({"target_percent": 99.0, "period_days": 30, "probe_interval_minutes": 15}), 3) is None


def test_the_collector_refuses_a_thin_slo_before_it_publishes_anything() -> None:
    class Metrics:
        def count(self, *a: object, **k: object) -> None:
            raise AssertionError("nothing may be published under a refused SLO")

    deps = Deps(stores=None, store=None, metrics=Metrics(), slo=slo_spec({"target_percent": 99.99}),  # type: ignore[arg-type]
                defaults={"sizes": "1MiB", "trials": 1})
    with pytest.raises(ConfigError, match="SloTargetPercent"):
        collect_step({}, deps)


def test_window_labels_say_the_window_really_used() -> None:
    from types import SimpleNamespace

    spec = SloSpec(target=0.999, probe_interval_seconds=900)
    now = 1_790_000_000.0
    rec = SimpleNamespace(status=ProbeStatus.COMPLETED, latency_hi=10.0, put_end=now - 60, planned_at=now - 61)
    status = slo_status([rec], now, spec)  # type: ignore[list-item]
    # The 5-minute window is widened to the 15-minute probe interval (it would usually hold no probe).
    assert status.windows == {"1h": "1h", "5m": "5m→15m", "6h": "6h", "30m": "30m"}
    assert status.budget_events(spec.target) == 0.001
