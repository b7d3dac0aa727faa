"""The answer first: one route's verdict - its RPO now (an upper bound), the target it is judged
against, how many probes were within it and what is failing - from a probe run's records
(`replmon probe`, `lab run`) or from the route's health in the store (`replmon report`, `lab chaos`).

Every finding has a ``kind`` (a stable snake_case code scripts may match), a ``severity``
(``page``: replication is late or failing now; ``ticket``: something to look at during the day)
and an ``effect`` on the verdict (docs/SEMANTICS.md, "Verdicts"). A finding's severity is the
``Severity`` tag of the CloudWatch alarm that watches the same cause (``FINDING_ALARMS``;
tests/test_verdict.py compares them with template.yaml), so the CLI never pages where the
deployed stack would open a ticket. Effects:

- ``breach``: replication judged failing or late (RPO over target or unbounded, a FAILED
  probe, the page burn-rate alert);
- ``not_measured``: a probe run that could not measure what it planned (a probe ERROR, a record
  missing, the execution failed, a STUCK probe: its latency is bounded from below only);
- ``none``: shown, never changes the verdict (the ticket burn-rate alert, missed-threshold events).

A route with nothing to judge is ``no_data``, never "RPO 0".

>>> from replmon.core.record import ProbeRecord, ProbeStatus
>>> r = ProbeRecord(route="r", probe_id="p", run_id="x", planned_at=0.0, size_bytes=1, size_class="1B", trial=1,
...                 status=ProbeStatus.COMPLETED, put_end=0.0, latency_lo=1.0, latency_hi=1.2, target_seconds=900.0)
>>> v = judge_run("r", [r], target_seconds=900.0, planned=1, now=10.0)
>>> (v.verdict, v.rpo_seconds, v.within_target, v.judged)
(<RpoVerdict.OK: 'ok'>, 1.2, 1, 1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.sizes import parse_size
from replmon.signals.slo import rpo


class RpoVerdict(StrEnum):
    OK = "ok"
    BREACH = "breach"
    NOT_MEASURED = "not_measured"
    NO_DATA = "no_data"


class Severity(StrEnum):
    PAGE = "page"
    TICKET = "ticket"


#: Verdicts from the most to the least urgent: a set of routes takes the first one any route has.
PRECEDENCE = (RpoVerdict.BREACH, RpoVerdict.NOT_MEASURED, RpoVerdict.NO_DATA, RpoVerdict.OK)


@dataclass(frozen=True)
class Finding:
    kind: str  # e.g. "probe_failed" (FINDING_KINDS)
    severity: Severity
    effect: str  # "breach" | "not_measured" | "none"
    count: int
    detail: str  # one sentence for people

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": str(self.severity), "effect": self.effect, "count": self.count, "detail": self.detail}


#: Every finding kind, its severity and its effect on the verdict (the JSON Schema enumerates the same).
#: A STUCK probe is a ticket, as ProbeStuckAlarm is: what pages is the RPO it raises (at least the
#: probe's age, its ``lo``), through ``rpo_over_target`` here and RpoAboveTargetAlarm in AWS, and only
#: when that is over the target (ProbeTimeoutSeconds 7200 > LatencyTargetSeconds 900 by default).
FINDING_KINDS: Mapping[str, tuple[Severity, str]] = {
    "rpo_over_target": (Severity.PAGE, "breach"),
    "rpo_unbounded": (Severity.PAGE, "breach"),
    "route_stalled": (Severity.PAGE, "breach"),
    "probe_failed": (Severity.PAGE, "breach"),
    "probe_stuck": (Severity.TICKET, "not_measured"),
    "slo_page_burn": (Severity.PAGE, "breach"),
    "probe_error": (Severity.TICKET, "not_measured"),
    "probe_interrupted": (Severity.TICKET, "not_measured"),
    "records_missing": (Severity.TICKET, "not_measured"),
    "run_failed": (Severity.TICKET, "not_measured"),
    "slo_ticket_burn": (Severity.TICKET, "none"),
    "missed_threshold_events": (Severity.TICKET, "none"),
    "probe_error_recent": (Severity.TICKET, "none"),
}

#: The template.yaml alarm that watches the same cause as each finding kind: the finding's severity
#: must equal that alarm's ``Severity`` tag (tests/test_verdict.py; docs/ALARMS.md shows the pairs).
#: None: no deployed alarm can see it (a CLI run's own interruption). ``...G00Alarm``: the fleet alarm
#: of group g00 (fleet/alarms.py; every group's has the same severity).
FINDING_ALARMS: Mapping[str, str | None] = {
    "rpo_over_target": "RpoAboveTargetG00Alarm",
    "rpo_unbounded": "RpoUnboundedG00Alarm",
    "route_stalled": "RouteStalledG00Alarm",
    "probe_failed": "ProbeFailedG00Alarm",
    "probe_stuck": "ProbeStuckG00Alarm",
    "slo_page_burn": "SloFastBurnG00Alarm",
    "probe_error": "ProbeErrorG00Alarm",
    "probe_interrupted": None,
    "records_missing": "RecordLostG00Alarm",
    "run_failed": "ExecutionsFailedAlarm",
    "slo_ticket_burn": "SloSlowBurnG00Alarm",
    "missed_threshold_events": "MissedThresholdEventG00Alarm",
    "probe_error_recent": "ProbeErrorG00Alarm",
}


def finding(kind: str, count: int, detail: str) -> Finding:
    severity, effect = FINDING_KINDS[kind]
    return Finding(kind, severity, effect, count, detail)


@dataclass(frozen=True)
class RouteJudgement:
    """What the headline says about one route, and what the JSON document's ``routes`` hold."""

    route: str
    verdict: RpoVerdict
    target_seconds: float
    rpo_seconds: float | None  # None: nothing bounded it (no data, or unbounded with no finite input)
    rpo_bound: str  # "upper" | "lower" (a STUCK probe: at least this) | "unbounded" | "none"
    probes: int  # records considered (any status)
    judged: int  # COMPLETED, FAILED, STUCK: probes that measured replication
    within_target: int  # COMPLETED with hi <= target
    findings: tuple[Finding, ...] = ()
    rpo_window_seconds: float | None = None  # report: how far back "now" looks; None for a run (its own probes)
    extra: dict[str, Any] = field(default_factory=dict)  # fields a caller adds (kept in the JSON, e.g. a fleet report's group)

    def to_json(self) -> dict[str, Any]:
        return {"route": self.route, "verdict": str(self.verdict), "target_seconds": self.target_seconds,
                "rpo_seconds": self.rpo_seconds, "rpo_bound": self.rpo_bound, "rpo_window_seconds": self.rpo_window_seconds,
                "probes": self.probes, "judged_probes": self.judged, "within_target_probes": self.within_target,
                "findings": [f.to_json() for f in self.findings], **self.extra}


def overall(verdicts: Iterable[RouteJudgement]) -> RpoVerdict:
    """The most urgent verdict among the routes (no route at all: no data)."""
    seen = {v.verdict for v in verdicts}
    return next((v for v in PRECEDENCE if v in seen), RpoVerdict.NO_DATA)


def _decide(findings: Sequence[Finding], has_data: bool) -> RpoVerdict:
    effects = {f.effect for f in findings}
    if "breach" in effects:
        return RpoVerdict.BREACH
    if "not_measured" in effects:
        return RpoVerdict.NOT_MEASURED
    return RpoVerdict.OK if has_data else RpoVerdict.NO_DATA


def _sizes(records: Iterable[ProbeRecord]) -> str:
    classes = sorted({r.size_class for r in records}, key=lambda s: (parse_size(s), s))
    return ", ".join(classes)


def num(x: float) -> str:
    """A figure for people: three significant figures, thousands separated, never scientific.

    >>> num(2008.98), num(0.0123), num(88.677), num(5000.0)
    ('2,009', '0.0123', '88.7', '5,000')
    """
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.1e}"


def duration(seconds: float) -> str:
    """3600 -> '1 h', 300 -> '5 min', 90 -> '90 s'."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{num(seconds)} s"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _status_findings(records: Sequence[ProbeRecord], target_seconds: float) -> list[Finding]:
    out = []
    by = {s: [r for r in records if r.status is s] for s in ProbeStatus}
    if by[ProbeStatus.FAILED]:
        recs = by[ProbeStatus.FAILED]
        reason = next((r.failure_reason for r in recs if r.failure_reason), None)
        out.append(finding("probe_failed", len(recs), f"{_count(len(recs), 'probe')} FAILED ({_sizes(recs)})"
                           + (f": {reason}" if reason else "")))
    stuck = by[ProbeStatus.STUCK]
    # late: COMPLETED over the target, or STUCK with even its lower bound over it (the RPO is at least that)
    late = [r for r in by[ProbeStatus.COMPLETED] if r.latency_hi is not None and r.latency_hi > target_seconds] + \
        [r for r in stuck if r.latency_lo is not None and r.latency_lo > target_seconds]
    if late:
        worst = max(late, key=_latency)
        out.append(finding("rpo_over_target", len(late), f"{_count(len(late), 'probe')} over the {num(target_seconds)} s target "
                           f"({_sizes(late)}; worst {'at least ' if worst.status is ProbeStatus.STUCK else ''}{num(_latency(worst))} s)"))
    if stuck:
        out.append(finding("probe_stuck", len(stuck), f"{_count(len(stuck), 'probe')} STUCK: not replicated by the timeout ({_sizes(stuck)})"))
    return out


def _latency(r: ProbeRecord) -> float:
    """What a judged probe says of the RPO: ``hi`` of a COMPLETED probe, ``lo`` of a STUCK one."""
    return (r.latency_hi if r.status is ProbeStatus.COMPLETED else r.latency_lo) or 0.0


def within(r: ProbeRecord, target_seconds: float) -> bool:
    """COMPLETED with its upper end at or under ``target_seconds`` (the record's own target may differ)."""
    return r.status is ProbeStatus.COMPLETED and r.latency_hi is not None and r.latency_hi <= target_seconds


def _rpo_bound(records: Sequence[ProbeRecord], seconds: float, unbounded: bool) -> str:
    if unbounded:
        return "unbounded"
    stuck = [r.latency_lo for r in records if r.status is ProbeStatus.STUCK and r.latency_lo is not None]
    return "lower" if stuck and max(stuck) >= seconds - 1e-9 else "upper"


def judge_run(route: str, records: Sequence[ProbeRecord], *, target_seconds: float, planned: int | None = None,
              execution_ok: bool = True, now: float) -> RouteJudgement:
    """A probe run's verdict for one route: its RPO is the RPO of the run's own probes (the same
    definition as the collector's, signals/slo.py, over exactly these records)."""
    mine = [r for r in records if r.route == route]
    r = rpo(now, float("inf"), mine, (), None, 0)
    judged = [x for x in mine if x.status.judged]
    findings = _status_findings(mine, target_seconds)
    errors = [x for x in mine if x.status is ProbeStatus.ERROR]
    if errors:
        reason = next((x.failure_reason for x in errors if x.failure_reason), None)
        findings.append(finding("probe_error", len(errors), f"{_count(len(errors), 'probe')} ERROR: replication not measured "
                                f"({_sizes(errors)})" + (f": {reason}" if reason else "")))
    interrupted = [x for x in mine if x.status is ProbeStatus.INTERRUPTED]
    if interrupted:
        findings.append(finding("probe_interrupted", len(interrupted), f"{_count(len(interrupted), 'probe')} INTERRUPTED"))
    if planned is not None and len(mine) < planned:
        findings.append(finding("records_missing", planned - len(mine), f"{planned - len(mine)} of {planned} planned probes have no record"))
    if not execution_ok:
        findings.append(finding("run_failed", 1, "the run's execution did not succeed"))
    bounded = r.inputs.get("recent_probe_latency") is not None  # unknown is null: FAILED probes alone bound nothing
    has_rpo = r.unbounded or bounded
    return RouteJudgement(route=route, verdict=_decide(findings, bool(judged)), target_seconds=target_seconds,
                        rpo_seconds=r.seconds if bounded else None, rpo_bound=_rpo_bound(mine, r.seconds, r.unbounded) if has_rpo else "none",
                        probes=len(mine), judged=len(judged), within_target=sum(within(x, target_seconds) for x in judged),
                        findings=tuple(findings))


def judge_health(health: Mapping[str, Any], records: Sequence[ProbeRecord], *, target_seconds: float,
                 rpo_window_seconds: float, now: float) -> RouteJudgement:
    """A route's verdict from its health (signals/health.py ``RouteHealth.to_json``, RPO over the
    last ``rpo_window_seconds``) and the records of the report's window (the counts)."""
    rp, slo = health["rpo"], health["slo"]
    bounded = [k for k in ("oldest_unfinished_probe", "recent_probe_latency", "rtc_replication_latency") if rp["inputs"].get(k) is not None]
    judged = [r for r in records if r.status.judged]
    findings: list[Finding] = []
    if rp["unbounded"]:
        findings.append(finding("rpo_unbounded", 1, "RPO unbounded: " + "; ".join(rp["reasons"])))
    elif bounded and rp["seconds"] > target_seconds:
        findings.append(finding("rpo_over_target", 1, f"RPO {num(rp['seconds'])} s is over the {num(target_seconds)} s target"))
    stall = health.get("stall") or {}
    if stall.get("seconds"):
        findings.append(finding("route_stalled", 1, f"stalled {duration(stall['seconds'])}: heartbeats are not replicating "
                                f"({stall['phase']}; StallSeconds, signals/stall.py)"))
    recent = [r for r in records if (r.put_end if r.put_end is not None else r.planned_at) >= now - rpo_window_seconds]
    stuck = [r for r in recent if r.status is ProbeStatus.STUCK]
    if stuck:
        findings.append(finding("probe_stuck", len(stuck), f"{_count(len(stuck), 'probe')} STUCK in the last {duration(rpo_window_seconds)} "
                                f"({_sizes(stuck)})"))
    errors = [r for r in recent if r.status is ProbeStatus.ERROR]
    if errors:
        findings.append(finding("probe_error_recent", len(errors), f"{_count(len(errors), 'probe')} ERROR in the last "
                                f"{duration(rpo_window_seconds)}: not measured ({_sizes(errors)})"))
    burn = slo["burn_rates"]
    for alert, kind in (("page", "slo_page_burn"), ("ticket", "slo_ticket_burn")):
        if slo["alerts"].get(alert):
            pair = [w for w in burn if w in (("1h", "5m") if alert == "page" else ("6h", "30m"))] or list(burn)
            rates = " and ".join(f"{num(burn[w] or 0.0)}x ({w})" for w in pair if burn.get(w) is not None)
            findings.append(finding(kind, 1, f"{alert} burn-rate alert: the error budget burns at {rates}"))
    missed = int(health.get("events", {}).get("OperationMissedThreshold", 0))
    if missed:
        findings.append(finding("missed_threshold_events", missed, f"{missed} OperationMissedThreshold event(s) in the last {duration(rpo_window_seconds)}"))
    has_rpo = rp["unbounded"] or bool(bounded)
    bound = _rpo_bound(recent, rp["seconds"], rp["unbounded"]) if has_rpo else "none"
    return RouteJudgement(route=health["route"], verdict=_decide(findings, has_rpo), target_seconds=target_seconds,
                        rpo_seconds=rp["seconds"] if bounded else None, rpo_bound=bound, probes=len(records), judged=len(judged),
                        within_target=sum(within(r, target_seconds) for r in judged), findings=tuple(findings),
                        rpo_window_seconds=rpo_window_seconds)


def with_run_cause(v: RouteJudgement, cause: str | None) -> RouteJudgement:
    """``v`` with what made its run fail (a full disk, the execution's error) in its ``run_failed``
    finding, so the headline names the cause, not only "did not succeed"."""
    if not cause or not any(f.kind == "run_failed" for f in v.findings):
        return v
    return replace(v, findings=tuple(replace(f, detail=f"{f.detail}: {cause}") if f.kind == "run_failed" else f for f in v.findings))


def status_counts(records: Iterable[ProbeRecord]) -> dict[str, int]:
    return dict(Counter(str(r.status) for r in records))
