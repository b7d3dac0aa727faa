"""`replmon lab chaos`: break the lab's replication path, watch the route breach, heal it, watch it recover.

Three phases, each a probe run through the real state machine: **baseline**, **fault** (a
Toxiproxy toxic on the source's replication target, lab/faults.py) and **healed**. After each,
the route's RPO and SLO are evaluated by the same code CollectSignals runs (signals/health.py) with the
thresholds template.yaml's alarms use: the RPO alarm's threshold is the latency target, the
burn-rate alarms' factors (14.4x page, 6x ticket) are read from template.yaml. Only the
windows are scaled: the SRE workbook's 5-minute short window becomes one phase, and the others
keep their ratios to it (1 h = 12 phases), so a lab run shows in minutes what AWS shows in hours.
The RPO looks back one phase. Each window is labelled with the alarm it stands for ("5m", "1h").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from replmon.core.record import ProbeRecord
from replmon.lab.lab import REPLICATION_PROXY, Lab
from replmon.local.execution import run_request
from replmon.local.template import TEMPLATE, load_template
from replmon.probe.request import load_settings
from replmon.signals.health import route_health
from replmon.signals.slo import BurnPair, SloSpec
from replmon.signals.verdict import RouteJudgement, judge_health


def alarm_factors() -> dict[str, float]:
    """The burn-rate alarms' thresholds, as template.yaml sets them (window label -> factor): the fleet
    alarms on SloBurnPage (1 h / 5 min) and SloBurnTicket (6 h / 30 min), fleet/alarms.py."""
    res = load_template(TEMPLATE)["Resources"]
    fast, slow = (float(res[f"{name}G00Alarm"]["Properties"]["Threshold"]) for name in ("SloFastBurn", "SloSlowBurn"))
    return {"1h": fast, "5m": fast, "6h": slow, "30m": slow}


def lab_spec(target_seconds: float, phase_seconds: float, target: float = 0.9999) -> SloSpec:
    f = alarm_factors()
    scale = phase_seconds / 300
    return SloSpec(threshold_seconds=target_seconds, target=target, probe_interval_seconds=phase_seconds,
                   pairs=(BurnPair("page", 3600 * scale, 300 * scale, f["1h"], ("1h", "5m")),
                          BurnPair("ticket", 21600 * scale, 1800 * scale, f["6h"], ("6h", "30m"))),
                   aligned=False)  # windows of seconds: exact, from the records (signals/slo.py)


@dataclass
class Phase:
    name: str
    fault: str | None
    seconds: float
    statuses: list[str]
    latencies: list[float | None]
    health: dict[str, Any]
    target_seconds: float
    notes: list[str] = field(default_factory=list)
    records: list[ProbeRecord] = field(default_factory=list)  # this phase's probes
    at: float = 0.0  # when the phase was evaluated (epoch seconds)

    def verdict(self) -> RouteJudgement:
        """The phase judged as `replmon report` judges a route (RPO window: the phase)."""
        return judge_health(self.health, self.records, target_seconds=self.target_seconds, rpo_window_seconds=self.seconds, now=self.at)

    @property
    def breached(self) -> bool:
        rpo = self.health["rpo"]
        over = rpo["seconds"] is not None and rpo["seconds"] > self.target_seconds  # null: nothing bounded it
        return bool(rpo["unbounded"] or over or self.health["slo"]["alerts"].get("page"))

    def row(self) -> dict[str, Any]:
        rpo, slo = self.health["rpo"], self.health["slo"]
        lat = [x for x in self.latencies if x is not None]
        return {"phase": self.name, "fault": self.fault or "-", "probes": ",".join(sorted(set(self.statuses))) + f" x{len(self.statuses)}",
                "max latency s": f"{max(lat):.2f}" if lat else "-", "RPO s": "unbounded" if rpo["unbounded"] else "-" if rpo["seconds"] is None else f"{rpo['seconds']:.2f}",
                "RPO > target": "yes" if rpo["unbounded"] or (rpo["seconds"] is not None and rpo["seconds"] > self.target_seconds) else "no",
                "burn short": _rate(slo["burn_rates"].get("5m")), "burn long": _rate(slo["burn_rates"].get("1h")),
                "page alert": "FIRING" if slo["alerts"].get("page") else "ok", "state": "BREACH" if self.breached else "healthy"}


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}x"


def wait_for_replication(lab: Lab, prefix: str, limit: float = 90.0) -> float | None:
    """Seconds until a fresh canary object replicates after healing (MinIO marks a target that
    timed out offline and fails replication to it at once until its health check passes)."""

    try:
        return _canary(lab, prefix, limit)
    finally:  # the canaries leave nothing behind, on either side (every version, as Cleanup deletes)
        remove_canaries(lab, f"{prefix}canary/")


def remove_canaries(lab: Lab, prefix: str, settle: float = 15.0) -> None:
    """Delete every canary version on both sides until both sides stay empty for a second: a canary
    whose replication failed while the target was offline can still be replicated by MinIO's
    retry queue moments after the first deletion."""
    from replmon.adapters.s3 import S3Stores
    from replmon.core.route import Route

    r = Route.model_validate(lab.route())
    stores = S3Stores(lab.keys)
    deadline, quiet = time.time() + settle, 0
    while quiet < 2 and time.time() < deadline:  # two empty listings a second apart
        found = 0
        for endpoint in (r.source, *r.destinations):
            store = stores(endpoint)
            versions = store.list_versions(endpoint.bucket, prefix)
            found += len(versions)
            store.delete_versions(endpoint.bucket, versions)
        quiet = 0 if found else quiet + 1
        time.sleep(1.0)


def _canary(lab: Lab, prefix: str, limit: float) -> float | None:
    from replmon.lab.lab import SOURCE_BUCKET

    s3 = lab.s3("source")
    start = time.time()
    n = 0
    while time.time() - start < limit:
        key = f"{prefix}canary/{int(start)}-{n}"
        n += 1
        s3.put_object(Bucket=SOURCE_BUCKET, Key=key, Body=b"canary")
        for _ in range(25):
            status = s3.head_object(Bucket=SOURCE_BUCKET, Key=key).get("ReplicationStatus")
            if status == "COMPLETED":
                return time.time() - start
            if status == "FAILED":
                break
            time.sleep(0.2)
        time.sleep(1.0)
    return None


def run_chaos(lab: Lab, fault: str, *, target_seconds: float = 2.0, probes: int = 3, sizes: str = "1MiB", timeout: int = 30,
              attributes: dict[str, int] | None = None, progress: Any = None) -> list[Phase]:
    # A route of its own: the lab's store keeps earlier runs, and this run's windows must hold only its probes.
    route = lab.route(f"chaos-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}")
    before = lab.events_to([route]) if lab.event_path is not None else None
    try:
        return _phases(lab, route, fault, target_seconds, probes, sizes, timeout, attributes, progress)
    finally:  # later runs on this lab map their events onto their own routes again (test order must not matter)
        if before is not None:
            lab.events_to(before or None)


def _phases(lab: Lab, route: dict[str, Any], fault: str, target_seconds: float, probes: int, sizes: str, timeout: int,
            attributes: dict[str, int] | None, progress: Any) -> list[Phase]:
    settings = load_settings({"sizes": sizes, "trials": probes, "max_concurrency": 1, "timeout_seconds": timeout,
                              "target_seconds": target_seconds, "poll": {"floor_seconds": 0.2, "use_history": False}})
    phases: list[Phase] = []
    for name, toxic in (("baseline", None), ("fault", fault), ("healed", None)):
        start = time.time()
        if toxic:
            lab.toxiproxy.add(REPLICATION_PROXY, toxic, **(attributes or {}))
        notes = []
        try:
            res = run_request(settings.for_routes([route]), lab.deps(), function_deps=lab.function_deps())
        finally:
            if toxic:
                lab.toxiproxy.heal(REPLICATION_PROXY)
        if toxic:
            waited = wait_for_replication(lab, route["prefix"])
            notes.append(f"replication resumed {waited:.1f} s after healing" if waited is not None
                         else "replication had not resumed 90 s after healing")
        if lab.event_path is not None and not lab.event_path.drain(15):
            notes.append("events still queued after 15 s")
        now = time.time()
        length = now - start
        spec = lab_spec(target_seconds, length)  # the short window is this phase
        health = route_health(lab.store(), route["name"], now, spec, length).to_json(spec)
        phases.append(Phase(name, toxic, round(length, 1), [str(r.status) for r in res.records],
                            [r.latency_hi if r.latency_hi is not None else r.latency_lo for r in res.records], health, target_seconds, notes,
                            list(res.records), now))
        if progress:
            progress(phases[-1])
    return phases
