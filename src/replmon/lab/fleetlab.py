"""A fleet on the lab's MinIO pair: N replicated bucket pairs the inventory finds, each
replicating through its own Toxiproxy listener, so a fault on one route's listener breaks that route
only; and buckets the inventory must refuse, each with its reason.

- ``app-NN`` (source server) -> ``app-NN-dr`` (destination server): a rule on the probe prefix, as
  the lab's own route (lab.py ``configure_replication``), through listener ``replication-app-NN``.
- Refused (:data:`REFUSED`): ``app-data-only`` and ``app-logs-only`` (rules on ``data/`` / ``logs/``
  only: FILTER_EXCLUDES_PREFIX), ``app-rule-disabled`` (its rule Disabled: RULE_DISABLED),
  ``app-tagged`` (its rule replicates tagged objects only: TAG_FILTER), ``app-opted-out`` (the opt-out
  tag: OPTED_OUT) and ``app-unreplicated`` (no replication configuration: not a route at all).
- The inventory's own reading (fleet/inventory.py ``survey_account``, the Inventory function's
  :class:`AwsBucketReader`) of the source server, as a MinIO user holding the member account's
  ``<prefix>-inventory`` statements; the fleet is what it found probeable among the ``app-`` buckets
  (the lab's own ``probe-source`` is found too, and left to `lab run` without ``--routes``).
- The probes and heartbeats run as a MinIO user holding the member account's ``<prefix>-prober``
  statements (templates/member-account.yaml: probe-prefix ARNs by pattern, ``*/replmon-probes/*``).
  The routes go to the state machine (an ad-hoc request) and, through a registry of this run's own
  (the port every function reads routes through), to the Heartbeat, reached with the prober's keys as
  the stack's own route is: the fleet planner and STS role assumption are not exercised here
  (tests/test_fleet_plan.py runs those on moto).
- One account on one host: the two Region names (:data:`SOURCE_REGION`, :data:`DESTINATION_REGION`)
  are the registry's labels (the reader is told each bucket's; MinIO signs in any), and MinIO knows no
  ``s3:ResourceAccount``, so that condition is dropped from both users' statements - which also means
  the lab cannot show a cross-account destination needing its own account's prober.
- MinIO's rule shape (as ``mc replicate add`` makes it: ``Role`` empty, the remote target's ARN,
  ``ExistingObjectReplication``): not an AWS fixture.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.core.fleetconfig import FleetSettings
from replmon.core.partitions import HEARTBEAT_STATE, LEASE, live_partition
from replmon.lab.lab import DEST_BUCKET, PREFIX, REPLICATION_RULE, SOURCE_BUCKET, Lab, s3_statements
from replmon.lab.servers import LabError
from replmon.lab.stallbench import (
    ALARM,
    LAB_FLOOR,
    LAB_PERIOD,
    Recorder,
    TimedNotifier,
    alarm_window,
    contributor_transitions,
    first,
    heartbeat_driver,
)

__all__ = ["FleetLab", "fleet_fault", "fleet_leftovers", "member_policy", "named_only", "run_fleet_bench", "setup_fleet"]

SOURCE_REGION, DESTINATION_REGION = "us-east-1", "eu-west-1"  # names only (see the module's docstring)
LAB_ACCOUNT = "111111111111"
MEMBER_TEMPLATE = Path(__file__).resolve().parents[3] / "templates" / "member-account.yaml"
#: The replicated buckets the inventory must refuse, and the reason it must give (core/registry.py Reason).
REFUSED = {"app-data-only": "FILTER_EXCLUDES_PREFIX", "app-logs-only": "FILTER_EXCLUDES_PREFIX", "app-rule-disabled": "RULE_DISABLED",
           "app-tagged": "TAG_FILTER", "app-opted-out": "OPTED_OUT"}
UNREPLICATED = "app-unreplicated"
NOT_REPLICATED = "NOT_REPLICATED"  # the survey's word for a bucket without replication (not a route, so no Reason)
HEARTBEAT_FAULTS = ("ProbeError", "CleanupFailed")  # what the Heartbeat counts instead of raising


def route_bucket(i: int) -> str:
    return f"app-{i:02d}"


def member_policy(role: str, template_path: Path = MEMBER_TEMPLATE) -> dict[str, Any]:
    """A member-account role's S3 statements (``ProberRole``, ``InventoryRole``) for a MinIO user:
    ``s3:ResourceAccount`` dropped (one account), every other condition kept."""
    from replmon.local.cfn import Resolver
    from replmon.local.template import load_template

    t = load_template(template_path)
    r = Resolver(t, {"HubAccountId": LAB_ACCOUNT, "ProbePrefix": PREFIX}, account=LAB_ACCOUNT)
    statements = []
    for policy in t["Resources"][role]["Properties"]["Policies"]:
        for st in s3_statements(r.resolve(policy["PolicyDocument"]["Statement"])):
            cond = {op: {k: v for k, v in kv.items() if k != "s3:ResourceAccount"} for op, kv in (st.get("Condition") or {}).items()}
            out = {k: v for k, v in st.items() if k != "Condition"}
            if any(cond.values()):
                out["Condition"] = {op: kv for op, kv in cond.items() if kv}
            statements.append(out)
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass
class FleetLab:
    lab: Lab
    routes: list[dict[str, Any]]  # the probeable routes (core/route.py Route, as JSON)
    survey: list[dict[str, Any]]  # every bucket the inventory read: bucket, mode, reason, detail
    proxies: dict[str, str]  # route -> its Toxiproxy listener
    prober: tuple[str, str] = field(repr=False, default=("", ""))

    def deps(self) -> Any:
        """The fleet's function dependencies: the prober's keys, and a registry of every probeable
        route (the port every function reads routes through), reached with those keys as the
        stack's own route is (fleet/stack_route.py spec_of_route)."""
        from replmon.adapters.memregistry import MemoryRegistry
        from replmon.core.route import Route
        from replmon.fleet.stack_route import spec_of_route

        d = self.lab.deps(keys=self.prober)
        d.registry = MemoryRegistry([spec_of_route(Route.model_validate(r), groups=1) for r in self.routes])
        return d


def _rule(filter_: dict[str, Any], status: str = "Enabled") -> dict[str, Any]:
    return {"ID": REPLICATION_RULE, "Priority": 1, "Status": status, "Filter": filter_,
            "SourceSelectionCriteria": {"ReplicaModifications": {"Status": "Enabled"}},
            "ExistingObjectReplication": {"Status": "Enabled"}, "DeleteMarkerReplication": {"Status": "Disabled"}}


def _rules() -> dict[str, dict[str, Any]]:
    """The refused buckets' rules (the ``app-NN`` ones replicate the probe prefix)."""
    probes = {"And": {"Prefix": PREFIX}}  # mc's shape for a prefix alone
    return {"app-data-only": _rule({"Prefix": "data/"}), "app-logs-only": _rule({"Prefix": "logs/"}),
            "app-rule-disabled": _rule(probes, "Disabled"),
            "app-tagged": _rule({"And": {"Prefix": PREFIX, "Tags": [{"Key": "replicate", "Value": "yes"}]}}),
            "app-opted-out": _rule(probes)}


def _user(lab: Lab, name: str, role: str) -> tuple[str, str]:
    from replmon.lab import minio_admin

    user = (name, secrets.token_urlsafe(24))
    for which in ("source", "destination"):
        admin = minio_admin.admin(lab.servers[which].url, lab.keys)
        admin.user_add(*user)
        admin.policy_add(f"replmon-{name}", policy=member_policy(role))
        admin.attach_policy([f"replmon-{name}"], user=user[0])
    return user


def setup_fleet(lab: Lab, n: int) -> FleetLab:
    """Create the fleet's buckets, listeners and rules and its two users, read the source server as the
    inventory does, and forget any heartbeat state an earlier run of these routes left (kept DynamoDB)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from minio.error import MinioAdminException

    if not 1 <= n <= 99:
        raise LabError(f"--routes {n}: the lab fleet has 1 to 99 routes")
    try:
        return _setup(lab, n)
    except (ClientError, BotoCoreError, MinioAdminException, RuntimeError) as exc:  # one line, as Lab.start's
        raise LabError(f"lab fleet: configuring MinIO failed: {str(exc).splitlines()[0]}") from None


def _setup(lab: Lab, n: int) -> FleetLab:
    from replmon.adapters import clients
    from replmon.adapters.member_buckets import AwsBucketReader
    from replmon.core.fleetconfig import FleetSettings
    from replmon.core.sizes import parse_size
    from replmon.fleet.accounts import InventorySettings
    from replmon.fleet.inventory import survey_account
    from replmon.lab import minio_admin
    from replmon.probe.heartbeat import GROUP_LEASE_PREFIX

    src, dst = lab.s3("source"), lab.s3("destination")
    rules = {route_bucket(i): _rule({"And": {"Prefix": PREFIX}}) for i in range(1, n + 1)} | _rules()
    proxies: dict[str, str] = {}
    enroll = FleetSettings().enroll

    def one(source: str) -> None:
        dest = source + "-dr"
        for client, bucket in ((src, source), (dst, dest)):
            client.create_bucket(Bucket=bucket)
            client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        proxies[source] = f"replication-{source}"
        port = lab.toxiproxy.proxy(proxies[source], lab.servers["destination"].port)
        target = minio_admin.remote_target(source, f"127.0.0.1:{port}", lab.keys, dest, parse_size(lab.bandwidth))
        arn = minio_admin.set_remote_target(lab.servers["source"].url, lab.keys, source, target)
        src.put_bucket_replication(Bucket=source, ReplicationConfiguration={"Role": "", "Rules": [
            {**rules[source], "Destination": {"Bucket": arn}}]})
        src.put_bucket_tagging(Bucket=source, Tagging={"TagSet": [{"Key": enroll[0], "Value": enroll[1]}]})  # probes are opt-in

    with ThreadPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(one, b) for b in rules]:
            f.result()
    settings = InventorySettings()
    key, value = settings.opt_out_tag.split("=", 1)
    src.put_bucket_tagging(Bucket="app-opted-out", Tagging={"TagSet": [{"Key": key, "Value": value}]})
    src.create_bucket(Bucket=UNREPLICATED)
    src.put_bucket_versioning(Bucket=UNREPLICATED, VersioningConfiguration={"Status": "Enabled"})
    inventory, prober = _user(lab, "fleet-inventory", "InventoryRole"), _user(lab, "fleet-prober", "ProberRole")

    # The inventory's reading of the source server, with the Inventory function's reader and rules.
    reads = clients.client("s3", clients.RESULTS, endpoint_url=lab.servers["source"].url, keys=inventory)
    regions = {b: SOURCE_REGION for b in [*rules, UNREPLICATED, SOURCE_BUCKET]} | {b + "-dr": DESTINATION_REGION for b in rules} \
        | {DEST_BUCKET: DESTINATION_REGION}
    reader = AwsBucketReader(LAB_ACCOUNT, None, make_client=lambda *_: reads, regions=regions)
    results = survey_account(reader, settings=settings, probe_prefix=PREFIX, groups=1, members=[LAB_ACCOUNT], now=time.time())
    survey: list[dict[str, Any]] = []
    routes: list[dict[str, Any]] = []
    urls = {SOURCE_REGION: lab.servers["source"].url, DESTINATION_REGION: lab.servers["destination"].url}
    for r in results:
        if r.route is None:
            survey.append({"bucket": r.bucket, "mode": "off", "reason": NOT_REPLICATED if r.not_replicated else (r.denied or {}).get("code", "ACCESS_DENIED"),
                           "detail": "no replication configuration" if r.not_replicated else (r.denied or {}).get("reason", "")})
            continue
        spec, v = r.route, r.route.verdict
        survey.append({"bucket": r.bucket, "mode": v.mode.value, "reason": v.reason_code.value, "detail": v.reason,
                       "source_region": spec.source.region, "destinations": [f"{d.bucket} ({d.region})" for d in spec.destinations]})
        if v.reason_code.value == "OK" and r.bucket in proxies and r.bucket not in REFUSED:
            spec = spec.model_copy(update={"source": spec.source.model_copy(update={"endpoint_url": urls[spec.source.region]}),
                                           "destinations": [d.model_copy(update={"endpoint_url": urls[d.region]}) for d in spec.destinations]})
            routes.append(spec.to_route(None).model_dump(mode="json", exclude_none=True))
    store = lab.store()  # a kept DynamoDB: an interrupted earlier run's stall state and lease must not carry over
    for route in routes:
        store.delete_item(live_partition(route["name"]), HEARTBEAT_STATE)
    store.delete_item(live_partition(f"{GROUP_LEASE_PREFIX}g00"), LEASE)
    return FleetLab(lab, routes, survey, {r["name"]: proxies[r["source"]["bucket"]] for r in routes}, prober)


# ------------------------------------------------------------------------------------------ the fault
def named_only(rep: dict[str, Any]) -> bool:
    """The fault run passed: every route a contributor of the fleet alarm; before the fault no route
    stalled and no contributor in ALARM; the faulted route STALLED, its contributor in ALARM, and both
    recovered after healing; no other contributor ever in ALARM, no other route stalled; the Heartbeat
    raised or answered no error and counted no failed HEAD, PUT or delete; nothing left under the probe
    prefix of any bucket the fleet made."""
    return (rep["contributors"] == rep["routes"] and rep["before_fault_transitions"] == 0 and rep["alarms_before_fault"] == 0
            and rep["stalled_s"] is not None and rep["alarm_s"] is not None and rep["healthy_s"] is not None
            and rep["alarm_ok_s"] is not None and rep["in_alarm"] == [rep["faulted_route"]] and rep["other_routes_stalled"] == []
            and rep["errors"] == [] and not any(rep["heartbeat_faults"].values()) and not any(rep["left_behind"].values()))


def fleet_fault(fleet: FleetLab, route: str, fault: str, handler: Callable[..., Any], *, warmup_periods: int = 3,
                tail_periods: int = 2, rng: random.Random | None = None, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Heartbeats on every route of the fleet (one Heartbeat invocation a period for the group, as
    deployed); ``fault`` on ``route``'s listener until it is STALLED, then healed until HEALTHY; the
    fleet alarm's contributors over the whole run, and what was left under the probe prefix."""
    tail_periods = max(tail_periods, alarm_window() + 1)  # the alarm's OK needs its window of clean minutes
    if route not in fleet.proxies:
        raise LabError(f"--route {route!r}: not a route the inventory found in the lab fleet ({', '.join(sorted(fleet.proxies))})")
    rng = rng or random.Random()
    recorder, notifier = Recorder(), TimedNotifier()
    deps = fleet.deps()
    deps.fleet = FleetSettings(heartbeat_seconds=LAB_PERIOD, stall_floor_seconds=LAB_FLOOR)
    deps.metrics, deps.notifier = recorder, notifier
    proxy, toxi = fleet.proxies[route], fleet.lab.toxiproxy
    with heartbeat_driver(handler, periods=1)(deps) as d:
        begin = time.time()
        time.sleep(warmup_periods * LAB_PERIOD + rng.uniform(0, LAB_PERIOD))  # a random phase of the schedule
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
    stall_points = [p for p in recorder.points if p.metric == "StallSeconds"]
    alarms, series = contributor_transitions(stall_points, begin, end, LAB_PERIOD, ALARM)
    stalled = first(recorder.stall(route), fault_at, lambda v: v > 0)
    recovered = first(recorder.stall(route), healed_at, lambda v: v == 0)
    mine = alarms.get(route, [])
    alarm_on = next((t for t, s in mine if s == "ALARM" and t >= fault_at), None)
    alarm_off = next((t for t, s in mine if s == "OK" and t >= healed_at), None)
    names = [r["name"] for r in fleet.routes]
    rep = {
        "routes": len(names), "faulted_route": route, "fault": fault, "period_seconds": LAB_PERIOD,
        "stalled_s": None if stalled is None else round(stalled - fault_at, 2),
        "alarm_s": None if alarm_on is None else round(alarm_on - fault_at, 2),
        "healthy_s": None if recovered is None else round(recovered - healed_at, 2),
        "alarm_ok_s": None if alarm_off is None else round(alarm_off - healed_at, 2),
        "contributors": len(series & set(names)),
        "in_alarm": sorted(r for r, ts in alarms.items() if any(s == "ALARM" for _, s in ts)),
        "alarms_before_fault": sum(1 for ts in alarms.values() for t, s in ts if s == "ALARM" and t < fault_at),
        "before_fault_transitions": sum(1 for p in stall_points if p.timestamp < fault_at and p.value > 0),
        "other_routes_stalled": sorted(r for r in names if r != route and any(v > 0 for _, v in recorder.stall(r))),
        "heartbeat_faults": {m: sum(1 for p in recorder.points if p.metric == m) for m in HEARTBEAT_FAULTS},
        "left_behind": fleet_leftovers(fleet),
        "messages": [s for s, _ in notifier.messages],
        "evidence": json.loads(notifier.messages[0][1]) if notifier.messages else None,
        "errors": d.errors + d.reported,  # raised, and answered instead of raised (state not saved, a skipped run)
    }
    rep["named_only_the_faulted_route"] = named_only(rep)
    return rep


def fleet_leftovers(fleet: FleetLab) -> dict[str, list[str]]:
    """Objects, versions and incomplete uploads under the probe prefix of every bucket the fleet made
    (the refused ones included: nothing may have been written there), as ``bucket/key``."""
    out: dict[str, list[str]] = {"source": [], "destination": []}
    for route in fleet.routes:
        for which, b in (("source", route["source"]["bucket"]), *(("destination", d["bucket"]) for d in route["destinations"])):
            s3 = fleet.lab.s3(which)
            r = s3.list_object_versions(Bucket=b, Prefix=PREFIX)
            out[which] += [f"{b}/{v['Key']}" for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
            out[which] += [f"{b}/upload:{u['Key']}" for u in s3.list_multipart_uploads(Bucket=b, Prefix=PREFIX).get("Uploads", [])]
    for b in [*REFUSED, UNREPLICATED]:
        r = fleet.lab.s3("source").list_object_versions(Bucket=b, Prefix=PREFIX)
        out["source"] += [f"{b}/{v['Key']}" for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
    return out


def run_fleet_bench(lab: Lab, *, routes: int, reps: int, fault: str = "hang", progress: Callable[[str], None] = print,
                    seed: int | None = None) -> dict[str, Any]:
    """Detection in the lab fleet (docs/BENCH-FLEET.md): ``reps`` faults, each on a route drawn at
    random, every route heartbeating through one Heartbeat invocation per period; per fault, the time
    to the faulted contributor's ALARM and every other contributor that went into ALARM (none expected)."""
    from replmon.local.aslrun import load_handler

    fleet = setup_fleet(lab, routes)
    handler = load_handler("Heartbeat")
    rng = random.Random(seed)
    out = []
    for i in range(reps):
        route = rng.choice(sorted(fleet.proxies))
        rep = fleet_fault(fleet, route, fault, handler, rng=rng, progress=lambda _: None)
        out.append({k: v for k, v in rep.items() if k != "evidence"})
        progress(f"fleet fault {i + 1}/{reps} on {route}: STALLED {rep['stalled_s']} s, ALARM {rep['alarm_s']} s; "
                 f"in ALARM: {', '.join(rep['in_alarm']) or 'none'}")
    return {"routes": len(fleet.routes), "survey": fleet.survey, "period_s": LAB_PERIOD, "floor_s": LAB_FLOOR, "repetitions": out}
