"""An SLO its sample can support - the budget in bad samples, refused or warned when
thin, and window labels that say the window really used (signals/slo.py, docs/SEMANTICS.md).

The target's default and meaning follow "Meeting compliance requirements with S3 Replication Time
Control" (the S3 User Guide says 99.9 % in places and 99.99 % in others,
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-time-control.html): replmon's
default is 99.9 %, and a target the probe count cannot support is refused, whatever RTC promises.
"""

from __future__ import annotations

import pytest

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.record import ProbeStatus
from replmon.core.registry import RouteSpec, load_route_spec
from replmon.signals.slo import (
    REFUSE_BELOW_EVENTS,
    SloSpec,
    check_budget,
    expected_judged,
    route_slo_target,
    route_target,
    slo_for_route,
    slo_spec,
    slo_status,
)


def default_spec() -> SloSpec:
    return slo_spec({"target_percent": DEFAULTS.slo_target * 100, "period_days": DEFAULTS.slo_period_days,
                     "probe_interval_minutes": DEFAULTS.schedule_rate_minutes})


def test_the_stacks_default_is_accepted_with_a_warning_that_states_the_budget() -> None:
    spec = default_spec()
    n = 3  # the stack's ad-hoc default: 1MiB, 64MiB, 1GiB x 1 trial
    assert expected_judged(spec, n) == 8640
    warning = check_budget(spec, n)
    assert warning is not None and "8640 judged probes per 30 days is an error budget of 8.64 bad probes" in warning
    assert "ExpertSettings slo_target_percent" in warning


def test_a_target_the_sample_cannot_support_is_refused_naming_the_field_and_the_fix() -> None:
    spec = slo_spec({"target_percent": 99.99, "period_days": 30, "probe_interval_minutes": 15})
    with pytest.raises(ConfigError) as info:
        check_budget(spec, 3)
    text = str(info.value)
    assert "ExpertSettings slo_target_percent: 99.99 % over 8640 judged probes per 30 days is an error budget of 0.86 bad probes" in text
    assert "lower ExpertSettings slo_target_percent to at most 99.94" in text
    # The fix it names is accepted.
    assert REFUSE_BELOW_EVENTS <= (1 - 0.9994) * 8640
    check_budget(slo_spec({"target_percent": 99.94, "period_days": 30, "probe_interval_minutes": 15}), 3)
    # A generous sample needs no warning at all.
    assert check_budget(slo_spec({"target_percent": 99.0, "period_days": 30, "probe_interval_minutes": 15}), 3) is None


# ------------------------------------------------------------------------------ per route: the target its classes support
def registry_route(**over: object) -> RouteSpec:
    raw: dict[str, object] = {"name": "dr-orders", "group": "g00", "origin": "explicit",
                              "source": {"account": "111122223333", "region": "eu-west-1", "bucket": "orders"},
                              "destinations": [{"account": "444455556666", "region": "eu-central-1", "bucket": "orders-dr"}]}
    return load_route_spec({**raw, **over})


def test_the_default_classes_cannot_support_99_9_so_a_route_is_judged_at_the_highest_target_that_leaves_5() -> None:
    """The default classes (1MiB@1h, 64MiB@6h, 1GiB@1d) give 720 + 120 + 30 = 870 judged probes a
    30-day period: 0.87 bad probes at 99.9 %. The rule (docs/SEMANTICS.md): the highest target, in
    0.01 % steps, whose budget is >= REFUSE_BELOW_EVENTS (5) bad probes: 1 - 5/870 -> 99.42 %."""
    fleet = FleetSettings()
    t = route_slo_target(registry_route(), fleet, default_spec())
    assert (t.samples, t.budget, t.target, t.lowered, t.judgeable) == (870.0, 0.87, 0.9942, True, True)
    assert (1 - t.target) * t.samples >= REFUSE_BELOW_EVENTS > (1 - (t.target + 0.0001)) * t.samples  # the highest such target
    assert "870 judged probes per 30 days is an error budget of 0.87 bad probes, under 5" in t.message()
    assert "judged at 99.42 % instead; set its slo.target_percent to 99.42" in t.message()
    slo = slo_for_route(registry_route(), fleet, default_spec())
    assert slo is not None and (slo.target, slo.threshold_seconds) == (0.9942, 900.0)
    assert slo.probe_interval_seconds == 3600.0, "the shortest window that holds a probe: its most frequent class"
    # the stack's own check agrees: that target over that sample is accepted (a warning: under 30)
    assert check_budget(SloSpec(target=slo.target, period_days=30, probe_interval_seconds=86_400 * 30 / 870), 1) is not None


def test_a_route_whose_own_target_its_classes_support_is_judged_with_it() -> None:
    fleet = FleetSettings()
    own = registry_route(slo={"target_percent": 99.0, "threshold_seconds": 600})
    t = route_slo_target(own, fleet, default_spec())
    assert (t.requested, t.target, t.lowered, t.budget) == (0.99, 0.99, False, 8.7)
    slo = slo_for_route(own, fleet, default_spec())
    assert slo is not None and (slo.target, slo.threshold_seconds, slo.period_days) == (0.99, 600, 30)
    # more probes support more: every 15 minutes, 3 classes -> 8,640 probes, 99.9 % is 8.64 bad probes
    busy = registry_route(probe={"classes": {s: {"every": "15m"} for s in ("1MiB", "64MiB", "1GiB")}})
    b = route_slo_target(busy, fleet, default_spec())
    assert (b.samples, b.target, b.lowered) == (8640.0, pytest.approx(0.999), False)
    assert slo_for_route(busy, fleet, default_spec()).probe_interval_seconds == 900.0  # type: ignore[union-attr]


def test_a_route_too_thin_for_any_target_is_not_judged_and_says_so() -> None:
    """1GiB once a week: ~4.3 probes a period; no target of 50 % or more leaves 5 bad probes."""
    thin = registry_route(probe={"classes": {"1GiB": {"every": "7d"}}})
    t = route_slo_target(thin, FleetSettings(), default_spec())
    assert t.target is None and not t.judgeable and t.lowered
    assert "the route is not judged (no SLO); add probe classes or trials to it" in t.message()
    assert slo_for_route(thin, FleetSettings(), default_spec()) is None
    # at exactly 10 probes a period the rule reaches its floor: 50 % leaves 5
    assert route_target("r", ProbeClasses.parse("1GiB@3d"), 0.999, 30).target == 0.5


def test_window_labels_say_the_window_really_used() -> None:
    from types import SimpleNamespace

    spec = SloSpec(target=0.999, probe_interval_seconds=900)
    now = 1_790_000_000.0
    rec = SimpleNamespace(status=ProbeStatus.COMPLETED, latency_hi=10.0, put_end=now - 60, planned_at=now - 61)
    status = slo_status([rec], now, spec)  # type: ignore[list-item]
    # The 5-minute window is widened to the 15-minute probe interval (it would usually hold no probe).
    assert status.windows == {"1h": "1h", "5m": "5m→15m", "6h": "6h", "30m": "30m"}
    assert status.budget_events(spec.target) == 0.001


@pytest.mark.parametrize("fn", ["CollectSignals", "Report"])
def test_the_functions_that_judge_routes_know_the_fleets_classes(fn: str) -> None:
    """slo_for_route needs the fleet's ProbeClasses for a route without its own: the functions that
    judge routes get them in REPLMON_FLEET (template.yaml Globals + ExpertSettings), rendered as CloudFormation would."""
    import json

    from replmon.core.expert import overlay
    from replmon.core.fleetconfig import load_fleet_settings
    from tests.cfnutil import default_transformed, function_environment, resolver

    cfn = default_transformed()
    r = resolver(cfn)
    r.params["ExpertSettings"] = json.dumps({"probe_classes": "1MiB@15m,1GiB@1d"})
    fleet = load_fleet_settings(json.loads(overlay(function_environment(cfn, fn, r))["REPLMON_FLEET"]))
    assert str(fleet.classes) == "1MiB@15m,1GiB@1d"
    t = route_slo_target(registry_route(), fleet, default_spec())
    assert (t.samples, t.target) == (2910.0, 0.9982)  # 2,880 + 30 probes: 99.9 % leaves 2.91, so 1 - 5/2910 -> 99.82 %
