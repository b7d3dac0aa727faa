"""A fleet on the lab's MinIO pair (issue 18.8): N replicated bucket pairs the inventory finds, each
replicating through its own Toxiproxy listener, so a fault on one route's listener breaks that route
only; and buckets the inventory must list as not probeable, with the reason.

- ``app-NN`` (source server) -> ``app-NN-dr`` (destination server): rule ``replmon-probes`` on the
  probe prefix, as the lab's own route (lab.py ``configure_replication``), through listener
  ``replication-app-NN``.
- ``app-data-only``: its one rule replicates ``data/`` only (FILTER_EXCLUDES_PREFIX);
  ``app-opted-out``: replicated, tagged with the opt-out tag (OPTED_OUT); ``app-unreplicated``:
  versioned, no replication configuration (not a route). The lab's own route (``probe-source``,
  `lab run` without ``--routes``) carries the opt-out tag too: the fleet is the ``app-NN`` routes.
- The routes are the inventory's own reading (fleet/inventory.py ``survey_account``) of the source
  server, through the same :class:`AwsBucketReader` the Inventory function uses. The lab is one
  account on one host: its servers carry two Region names (``SOURCE_REGION``, ``DESTINATION_REGION``)
  for the registry's rows only; MinIO itself signs in ``us-east-1``.
- Permissions: the fleet's functions run as one MinIO user whose policy is the member account's
  ``<prefix>-prober`` role (templates/member-account.yaml: probe-prefix ARNs by pattern, ``*/replmon-probes/*``),
  what a registry route's calls are made with in AWS. MinIO knows no ``s3:ResourceAccount`` (one
  account here): that condition is dropped, the ``s3:prefix`` condition kept.
"""

from __future__ import annotations

import json
import math
import random
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.fleetconfig import FleetSettings
from replmon.core.telemetry import ROUTE
from replmon.lab.lab import DEST_BUCKET, PREFIX, REPLICATION_RULE, SOURCE_BUCKET, Lab
from replmon.lab.stallbench import LAB_FLOOR, LAB_PERIOD, Driver, Recorder, TimedNotifier, first
from replmon.local.insights import AlarmEvaluator, Point, template_alarms

__all__ = ["FleetLab", "fleet_alarm_transitions", "fleet_fault", "fleet_leftovers", "prober_policy", "run_fleet_bench", "setup_fleet"]

SOURCE_REGION, DESTINATION_REGION = "us-east-1", "eu-west-1"  # names only (see the module's docstring)
LAB_ACCOUNT = "111111111111"
MEMBER_TEMPLATE = Path(__file__).resolve().parents[3] / "templates" / "member-account.yaml"
ALARM = "RouteStalledG00Alarm"
#: The buckets the inventory must refuse, and why (fleet/inventory.py Reason).
UNPROBEABLE = {"app-data-only": "FILTER_EXCLUDES_PREFIX", "app-opted-out": "OPTED_OUT"}
UNREPLICATED = "app-unreplicated"


def route_bucket(i: int) -> str:
    return f"app-{i:02d}"


def prober_policy(template_path: Path = MEMBER_TEMPLATE) -> dict[str, Any]:
    """The member account's prober role's S3 statements, for a MinIO user (``s3:ResourceAccount`` dropped)."""
    from replmon.local.cfn import Resolver
    from replmon.local.template import load_template

    t = load_template(template_path)
    r = Resolver(t, {"HubAccountId": LAB_ACCOUNT, "ProbePrefix": PREFIX}, account=LAB_ACCOUNT)
    statements = []
    for policy in t["Resources"]["ProberRole"]["Properties"]["Policies"]:
        for st in r.resolve(policy["PolicyDocument"]["Statement"]):
            actions = [a for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]) if a.startswith("s3:")]
            if not actions:
                continue
            out = {k: v for k, v in st.items() if k != "Condition"} | {"Action": actions}
            cond = {op: {k: v for k, v in kv.items() if k != "s3:ResourceAccount"} for op, kv in (st.get("Condition") or {}).items()}
            cond = {op: kv for op, kv in cond.items() if kv}
            if cond:
                out["Condition"] = cond
            statements.append(out)
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass
class FleetLab:
    lab: Lab
    routes: list[dict[str, Any]]  # the probeable routes, as the stack's routes (lab.py lab_route's shape)
    survey: list[dict[str, Any]]  # every bucket the inventory read: bucket, mode, reason, detail
    proxies: dict[str, str]  # route -> its Toxiproxy listener
    prober: tuple[str, str] = field(repr=False, default=("", ""))

    def deps(self) -> Any:
        """The fleet's function dependencies: the prober's keys, every probeable route."""
        d = self.lab.deps(keys=self.prober)
        d.defaults = {"routes": self.routes}
        return d


def _replicate(lab: Lab, source: str, dest: str, proxy_port: int, rule: dict[str, Any]) -> None:
    from replmon.core.sizes import parse_size
    from replmon.lab import minio_admin

    target = minio_admin.remote_target(source, f"127.0.0.1:{proxy_port}", lab.keys, dest, parse_size(lab.bandwidth))
    arn = minio_admin.set_remote_target(lab.servers["source"].url, lab.keys, source, target)
    lab.s3("source").put_bucket_replication(Bucket=source, ReplicationConfiguration={"Role": "", "Rules": [
        {**rule, "Destination": {"Bucket": arn}}]})


def _rule(prefix: str) -> dict[str, Any]:
    return {"ID": REPLICATION_RULE, "Priority": 1, "Status": "Enabled", "Filter": {"And": {"Prefix": prefix}},
            "SourceSelectionCriteria": {"ReplicaModifications": {"Status": "Enabled"}},
            "ExistingObjectReplication": {"Status": "Enabled"}, "DeleteMarkerReplication": {"Status": "Disabled"}}


def setup_fleet(lab: Lab, n: int) -> FleetLab:
    """Create the fleet's buckets, listeners and rules, a prober user on both servers, and read the
    source server as the inventory does; the routes are what it found probeable."""
    from replmon.adapters.member_buckets import AwsBucketReader
    from replmon.fleet.accounts import InventorySettings
    from replmon.fleet.inventory import survey_account
    from replmon.lab import minio_admin

    if not 1 <= n <= 99:
        raise ValueError(f"--routes {n}: the lab fleet has 1 to 99 routes")
    src, dst = lab.s3("source"), lab.s3("destination")
    pairs = [(route_bucket(i), route_bucket(i) + "-dr") for i in range(1, n + 1)]
    pairs += [(b, b + "-dr") for b in UNPROBEABLE]
    proxies: dict[str, str] = {}

    def one(pair: tuple[str, str]) -> None:
        source, dest = pair
        for client, bucket in ((src, source), (dst, dest)):
            client.create_bucket(Bucket=bucket)
            client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        proxy = f"replication-{source}"
        port = lab.toxiproxy.proxy(proxy, lab.servers["destination"].port)
        proxies[source] = proxy
        _replicate(lab, source, dest, port, _rule("data/" if source == "app-data-only" else PREFIX))

    with ThreadPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(one, p) for p in pairs]:
            f.result()
    key, value = DEFAULTS.opt_out_tag.split("=", 1)
    # the lab's own route (`lab run` without --routes) is tagged out of the fleet, as an owner would
    for bucket in ("app-opted-out", SOURCE_BUCKET):
        src.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": key, "Value": value}]})
    src.create_bucket(Bucket=UNREPLICATED)
    src.put_bucket_versioning(Bucket=UNREPLICATED, VersioningConfiguration={"Status": "Enabled"})

    prober = ("fleet-prober", secrets.token_urlsafe(24))
    for which in ("source", "destination"):
        admin = minio_admin.admin(lab.servers[which].url, lab.keys)
        admin.user_add(*prober)
        admin.policy_add("replmon-fleet-prober", policy=prober_policy())
        admin.attach_policy(["replmon-fleet-prober"], user=prober[0])

    # The inventory's reading of the source server (the Inventory function's reader and rules).
    def make(service: str, region: str | None, credentials: object) -> Any:
        return src

    reader = AwsBucketReader(LAB_ACCOUNT, None, make_client=make)
    everything = [*pairs, (SOURCE_BUCKET, DEST_BUCKET)]
    reader._regions.update({s: SOURCE_REGION for s, _ in everything} | {d: DESTINATION_REGION for _, d in everything}
                           | {UNREPLICATED: SOURCE_REGION})
    results = survey_account(reader, settings=InventorySettings(), probe_prefix=PREFIX, groups=1, members=[LAB_ACCOUNT], now=time.time())
    survey: list[dict[str, Any]] = []
    routes: list[dict[str, Any]] = []
    src_url, dst_url = lab.servers["source"].url, lab.servers["destination"].url
    for r in results:
        if r.route is None:
            survey.append({"bucket": r.bucket, "mode": "none", "reason": "NOT_REPLICATED" if r.not_replicated else "ACCESS_DENIED",
                           "detail": "no replication configuration" if r.not_replicated else (r.denied or {}).get("reason", "")})
            continue
        v = r.route.verdict
        survey.append({"bucket": r.bucket, "mode": v.mode.value, "reason": v.reason_code.value, "detail": v.reason,
                       "source_region": r.route.source.region, "destinations": [f"{d.bucket} ({d.region})" for d in r.route.destinations]})
        if v.reason_code.value == "OK":
            routes.append({"name": r.route.name, "source": {"bucket": r.route.source.bucket, "endpoint_url": src_url},
                           "destinations": [{"bucket": d.bucket, "endpoint_url": dst_url} for d in r.route.destinations],
                           "prefix": PREFIX})
    return FleetLab(lab, routes, survey, {r["name"]: proxies[r["source"]["bucket"]] for r in routes}, prober)


# ------------------------------------------------------------------------------------------ the fault
def fleet_alarm_transitions(points: list[Point], start: float, end: float, period: float) -> dict[str, list[tuple[float, str]]]:
    """The template's RouteStalled alarm stepped each alarm minute over every route's StallSeconds (the
    lab's times stretched by 60 / ``period`` from ``start``, as lab/stallbench.py does for one route):
    each contributor's state changes, mapped back to lab time. A route absent here never left OK."""
    from replmon.local.template import TEMPLATE, load_template

    evaluator: AlarmEvaluator = template_alarms(load_template(TEMPLATE))[ALARM]
    scale = 60.0 / period
    scaled = [Point(p.namespace, p.metric, p.dimensions, start + (p.timestamp - start) * scale, p.value) for p in points
              if p.metric == "StallSeconds"]
    out: dict[str, list[tuple[float, str]]] = {}
    state: dict[str, str] = {}
    t = math.floor(start / 60.0) * 60.0 + 60.0
    while t <= start + (end - start) * scale + 60.0:
        step = evaluator.step(t + 1.0, scaled)
        for key, c in step.contributors.items():
            route = key[0]
            if c.state != state.get(route, "OK"):
                out.setdefault(route, []).append((start + (t - start) / scale, c.state))
                state[route] = c.state
        t += 60.0
    return out


def fleet_fault(fleet: FleetLab, route: str, fault: str, handler: Callable[..., Any], *, warmup_periods: int = 3,
                tail_periods: int = 2, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Heartbeats on every route of the fleet (one Heartbeat invocation a period for the group, as
    deployed: one invocation serves the group's routes); ``fault`` on ``route``'s listener until it is
    STALLED, then healed until HEALTHY; the fleet alarm's contributors over the whole run."""
    from replmon import wiring
    from replmon.local.aslrun import LambdaContext

    if route not in fleet.proxies:
        raise ValueError(f"--route {route!r}: not a route of the lab fleet ({', '.join(sorted(fleet.proxies))})")
    recorder, notifier = Recorder(), TimedNotifier()
    deps = fleet.deps()
    deps.fleet = FleetSettings(heartbeat_seconds=LAB_PERIOD, stall_floor_seconds=LAB_FLOOR)
    deps.metrics, deps.notifier = recorder, notifier

    def invoke() -> dict[str, Any]:
        with wiring.injected({"Heartbeat": deps}):
            out: dict[str, Any] = handler({"group": "g00", "periods": 1}, LambdaContext("Heartbeat"))
        return out

    proxy = fleet.proxies[route]
    toxi = fleet.lab.toxiproxy
    with Driver(invoke, every=LAB_PERIOD) as d:
        begin = time.time()
        time.sleep(warmup_periods * LAB_PERIOD + random.uniform(0, LAB_PERIOD))
        fault_at = time.time()
        progress(f"{fault} on {route}'s replication listener ({proxy})")
        toxi.add(proxy, fault)
        try:
            deadline = fault_at + 15 * LAB_PERIOD
            while time.time() < deadline and first(recorder.stall(route), fault_at, lambda v: v > 0) is None:
                time.sleep(0.5)
            time.sleep(tail_periods * LAB_PERIOD)
        finally:
            toxi.heal(proxy)
        healed_at = time.time()
        progress(f"healed {route}")
        deadline = healed_at + 30 * LAB_PERIOD
        while time.time() < deadline and first(recorder.stall(route), healed_at, lambda v: v == 0) is None:
            time.sleep(0.5)
        time.sleep(tail_periods * LAB_PERIOD)
    end = time.time()
    alarms = fleet_alarm_transitions(recorder.points, begin, end, LAB_PERIOD)
    stalled = first(recorder.stall(route), fault_at, lambda v: v > 0)
    recovered = first(recorder.stall(route), healed_at, lambda v: v == 0)
    mine = alarms.get(route, [])
    alarm_on = next((t for t, s in mine if s == "ALARM" and t >= fault_at), None)
    alarm_off = next((t for t, s in mine if s == "OK" and t >= healed_at), None)
    reporting = sorted({p.dimensions[ROUTE] for p in recorder.points if p.metric == "StallSeconds" and ROUTE in p.dimensions})
    return {
        "routes": len(fleet.routes), "faulted_route": route, "fault": fault, "period_seconds": LAB_PERIOD,
        "stalled_s": None if stalled is None else round(stalled - fault_at, 2),
        "alarm_s": None if alarm_on is None else round(alarm_on - fault_at, 2),
        "healthy_s": None if recovered is None else round(recovered - healed_at, 2),
        "alarm_ok_s": None if alarm_off is None else round(alarm_off - healed_at, 2),
        "contributors": len(reporting),
        "in_alarm": sorted(r for r, ts in alarms.items() if any(s == "ALARM" for _, s in ts)),
        "other_routes_stalled": sorted(r for r in reporting if r != route and any(v > 0 for _, v in recorder.stall(r))),
        "messages": [s for s, _ in notifier.messages],
        "evidence": json.loads(notifier.messages[0][1]) if notifier.messages else None,
        "errors": d.errors,
    }


def fleet_leftovers(fleet: FleetLab) -> dict[str, list[str]]:
    """Probe objects, versions and incomplete uploads still under the probe prefix of any fleet bucket
    (``bucket/key``): a run must leave none."""
    out: dict[str, list[str]] = {"source": [], "destination": []}
    for route in fleet.routes:
        for which, bucket in (("source", route["source"]["bucket"]), *(("destination", d["bucket"]) for d in route["destinations"])):
            s3 = fleet.lab.s3(which)
            r = s3.list_object_versions(Bucket=bucket, Prefix=PREFIX)
            out[which] += [f"{bucket}/{v['Key']}" for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
            out[which] += [f"{bucket}/upload:{u['Key']}" for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=PREFIX).get("Uploads", [])]
    return out


def run_fleet_bench(lab: Lab, *, routes: int, reps: int, fault: str = "hang", progress: Callable[[str], None] = print,
                    seed: int | None = None) -> dict[str, Any]:
    """Detection in the lab fleet (issue 18's benchmark): ``reps`` faults, each on a route drawn at
    random, every route heartbeating through one Heartbeat invocation per period; per fault, the time
    to the faulted contributor's ALARM and every other contributor that went into ALARM (none expected)."""
    from replmon.local.aslrun import load_handler

    fleet = setup_fleet(lab, routes)
    handler = load_handler("Heartbeat")
    rng = random.Random(seed)
    out = []
    for i in range(reps):
        route = rng.choice(sorted(fleet.proxies))
        rep = fleet_fault(fleet, route, fault, handler, progress=lambda _: None)
        out.append({k: v for k, v in rep.items() if k != "evidence"})
        progress(f"fleet fault {i + 1}/{reps} on {route}: STALLED {rep['stalled_s']} s, ALARM {rep['alarm_s']} s; "
                 f"in ALARM: {', '.join(rep['in_alarm']) or 'none'}")
    return {"routes": len(fleet.routes), "unprobeable": [s for s in fleet.survey if s["reason"] != "OK"], "period_s": LAB_PERIOD,
            "repetitions": out}
