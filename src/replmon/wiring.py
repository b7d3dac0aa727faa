"""The composition root: where configuration becomes adapters, and adapters reach the domain.

Every handler, command and lab run gets its dependencies as one :class:`Deps`, built here:

- **Lambda**: :func:`from_env` reads the variables template.yaml sets, once per execution
  environment (:func:`for_function` builds it on first use).
- **The CLI and the lab**: :func:`local_deps` (S3-compatible keys per endpoint, DynamoDB Local,
  a spool directory), :func:`preflight_deps` and :func:`latency_table`.
- **Every AWS client** comes from adapters/clients.py, under its one retry and timeout policy.

**Tests (and the lab) replace what handlers get in one way**: ``with injected(deps): ...`` for
every function, or ``with injected({"IngestEvents": deps}): ...`` for some; the innermost
injection that names a function wins, and the environment's wiring is used for the rest::

    with wiring.injected(Deps(stores=fake.stores(), store=table, metrics=NullMetrics(), clock=clock)):
        load_handler("RecordResult")(event, LambdaContext("RecordResult"))

Each folder's steps declare what they need as a Protocol (``probe.steps.ProbeDeps``,
``signals.collector.CollectorDeps``); :class:`Deps` has all of it. Adapters are imported only
when :func:`from_env` or a builder runs: a handler's import stays cheap (a cold start).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.core.clock import Clock, WallClock
from replmon.core.defaults import DEFAULTS
from replmon.core.fleetconfig import ENV as FLEET_ENV
from replmon.core.fleetconfig import FleetSettings, load_fleet_settings
from replmon.core.ports import (
    ExecutionStatus,
    LatencyTable,
    LeaseStore,
    MemberAccounts,
    MetricReaders,
    MetricsSink,
    Notifier,
    ObjectStores,
    PlanStore,
    RecordSpool,
    RegistryStore,
    RollupStore,
)
from replmon.probe.upload import UploadSettings
from replmon.signals.slo import SloSpec, slo_spec

__all__ = ["Deps", "DepsSource", "for_function", "from_env", "injected", "latency_table", "local_deps", "preflight_deps"]


def _results_stores() -> ObjectStores:
    from replmon.adapters.clients import RESULTS
    from replmon.adapters.s3 import S3Stores

    return S3Stores(data=RESULTS, control=RESULTS)


@dataclass
class Deps:
    """Everything a handler or command needs from outside, as ports, plus the deployment's settings."""

    stores: ObjectStores
    store: LatencyTable
    metrics: MetricsSink
    clock: Clock = field(default_factory=WallClock)
    upload: UploadSettings = field(default_factory=UploadSettings)
    retention_days: int = DEFAULTS.retention_days
    defaults: dict[str, Any] = field(default_factory=dict)  # REPLMON_DEFAULTS: the deployment's request defaults
    spool: RecordSpool | None = None
    poll_function_timeout: float = DEFAULTS.poll_function_timeout_seconds
    event_skew: float = DEFAULTS.event_clock_skew_seconds
    slo: SloSpec = field(default_factory=SloSpec)
    rpo_window: float = DEFAULTS.rpo_window_seconds
    results: ObjectStores = field(default_factory=_results_stores)  # IngestFioResults reads result files here
    # The fleet (docs/design/fleet.md): settings from REPLMON_FLEET; each port is built in from_env from its
    # adapter (registry, leases and plans; rollups are the latency store's). metric_readers:
    # the collector's GetMetricData per (account, Region) (None: RTC metrics not read).
    fleet: FleetSettings = field(default_factory=FleetSettings)
    registry: RegistryStore | None = None
    leases: LeaseStore | None = None
    executions: ExecutionStatus | None = None  # is a lease's holder still running? (BeginRouteRun)
    run_owner: Mapping[str, str] | None = None  # a local run's host and pid, on its leases (fleet/lease.py local_owner)
    rollups: RollupStore | None = None
    plans: PlanStore | None = None
    metric_readers: MetricReaders | None = None
    notifier: Notifier | None = None  # the evidence topic (Heartbeat's stall evidence); None: log only
    heartbeat_stores: ObjectStores | None = None  # the Heartbeat's S3 clients (short timeouts); None: ``stores``
    # The routes are the registry's only (``registry``): the stack's own route is an item there
    # (fleet/stack_route.py); REPLMON_DEFAULTS holds request defaults, never routes.


def from_env(env: Mapping[str, str] = os.environ) -> Deps:
    """Lambda (and lab) configuration comes from the environment, never from code changes:
    REPLMON_TABLE, REPLMON_DYNAMODB_ENDPOINT, REPLMON_DEFAULTS (JSON), REPLMON_RETENTION_DAYS,
    REPLMON_SPOOL_QUEUE_URL, REPLMON_SPOOL_QUARANTINE_URL, REPLMON_POLL_FUNCTION_TIMEOUT, REPLMON_METRICS (emf|none),
    REPLMON_COMPOSE_THRESHOLD, REPLMON_SLO (JSON: threshold_seconds, target_percent, period_days,
    probe_interval_minutes), REPLMON_EVENT_CLOCK_SKEW, REPLMON_READ_RTC (true: CloudWatch readers, one per (account, Region)),
    REPLMON_FLEET (JSON: core/fleetconfig.py FleetSettings), REPLMON_EVIDENCE_TOPIC_ARN (Heartbeat's stall evidence: the ticket topic),
    REPLMON_EXPERT (JSON: core/expert.py, the ExpertSettings parameter laid over the others)."""
    from replmon.adapters import clients
    from replmon.adapters.cloudwatch import CloudWatchReaders
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.executions import StepFunctionsExecutions
    from replmon.adapters.leases import DynamoLeases
    from replmon.adapters.metrics import EmfMetrics, NullMetrics
    from replmon.adapters.notify import SnsNotifier
    from replmon.adapters.plans import S3Plans
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.adapters.s3 import S3Stores
    from replmon.adapters.spool import SqsSpool
    from replmon.core.expert import overlay
    from replmon.core.sizes import parse_size

    env = overlay(env)  # ExpertSettings (REPLMON_EXPERT) into the variables below; a bad one: ConfigError naming it
    upload = UploadSettings()
    if env.get("REPLMON_COMPOSE_THRESHOLD"):
        upload = UploadSettings(compose_threshold=parse_size(env["REPLMON_COMPOSE_THRESHOLD"]))
    queue = env.get("REPLMON_SPOOL_QUEUE_URL")
    table = clients.dynamodb(clients.STORE, endpoint_url=env.get("REPLMON_DYNAMODB_ENDPOINT") or None)
    fleet = load_fleet_settings(json.loads(env.get(FLEET_ENV) or "{}"))
    return Deps(
        stores=S3Stores(external_id=fleet.member_external_id),  # member roles: with MemberExternalId
        store=DynamoLatencyStore(env["REPLMON_TABLE"], table),
        leases=DynamoLeases(env["REPLMON_TABLE"], table),
        registry=DynamoRegistry(env["REPLMON_TABLE"], table),
        executions=StepFunctionsExecutions(lambda: clients.client("stepfunctions", clients.STORE)),
        # the fleet alarms' RouteGroup dimension comes from RouteGroups (fleet/alarms.py)
        metrics=NullMetrics() if env.get("REPLMON_METRICS", "emf") == "none" else EmfMetrics(route_groups=fleet.route_groups),
        upload=upload,
        retention_days=int(env.get("REPLMON_RETENTION_DAYS", str(DEFAULTS.retention_days))),
        defaults=json.loads(env.get("REPLMON_DEFAULTS") or "{}"),
        spool=SqsSpool(queue, clients.client("sqs", clients.STORE), env.get("REPLMON_SPOOL_QUARANTINE_URL") or None) if queue else None,
        poll_function_timeout=float(env.get("REPLMON_POLL_FUNCTION_TIMEOUT", DEFAULTS.poll_function_timeout_seconds)),
        event_skew=float(env.get("REPLMON_EVENT_CLOCK_SKEW", DEFAULTS.event_clock_skew_seconds)),
        slo=slo_spec(json.loads(env.get("REPLMON_SLO") or "{}")),
        # a member route's metrics are read as <MemberRolePrefix>-reader in its account (adapters/cloudwatch.py)
        metric_readers=(CloudWatchReaders(fleet.member_role_prefix, fleet.member_external_id)
                        if env.get("REPLMON_READ_RTC", "false").lower() == "true" else None),
        fleet=fleet,
        plans=S3Plans(fleet.plan_bucket, clients.client("s3", clients.STORE)) if fleet.plan_bucket else None,
        heartbeat_stores=S3Stores(data=clients.HEARTBEAT, control=clients.HEARTBEAT, external_id=fleet.member_external_id),
        notifier=SnsNotifier(env["REPLMON_EVIDENCE_TOPIC_ARN"], clients.client("sns", clients.STORE)) if env.get("REPLMON_EVIDENCE_TOPIC_ARN") else None,
    )


def latency_table(table: str, *, endpoint_url: str | None = None, region: str | None = None, profile: str | None = None,
                  keys: tuple[str, str] | None = None, call: str = "store") -> LatencyTable:
    """The latency table under a call class of the policy (``"read"`` for reports, ``"preflight"``)."""
    from replmon.adapters import clients
    from replmon.adapters.dynamodb import DynamoLatencyStore

    return DynamoLatencyStore(table, clients.dynamodb(clients.POLICY[call], endpoint_url=endpoint_url, region=region, keys=keys, profile=profile))


def member_accounts(fleet: FleetSettings) -> MemberAccounts:
    """The inventory's way into member accounts: AssumeRole of ``<MemberRolePrefix>-inventory`` (+ ExternalId)."""
    from replmon.adapters.member_buckets import AwsMembers

    return AwsMembers(fleet.member_role_prefix, fleet.member_external_id or None)


def local_registry(store: LatencyTable) -> RegistryStore:
    """The route registry in the same table as ``store`` (a DynamoLatencyStore, as deployed: the lab's
    DynamoDB Local), else in memory (an ad-hoc run's adapters/memtable.py)."""
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.memregistry import MemoryRegistry
    from replmon.adapters.registry_table import DynamoRegistry

    if isinstance(store, DynamoLatencyStore):
        return DynamoRegistry(store.table, store.client)
    return MemoryRegistry()


def run_leases(store: LatencyTable) -> LeaseStore:
    """The run leases in the same table as ``store`` (a DynamoLatencyStore), with its client."""
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.leases import DynamoLeases, MemoryLeases

    if isinstance(store, DynamoLatencyStore):
        return DynamoLeases(store.table, store.client)
    return MemoryLeases()  # an ad-hoc run's in-memory table: leases in this process only


def local_deps(*, table: str, dynamodb_endpoint: str | None = None, region: str | None = None, profile: str | None = None,
               keys: tuple[str, str] | None = None, by_url: Mapping[str, tuple[str, str]] | None = None,
               table_keys: tuple[str, str] | None = None, spool_dir: Path | None = None, store: LatencyTable | None = None,
               **settings: Any) -> Deps:
    """What `replmon probe` and the lab run with: S3 (``keys`` for all endpoints, ``by_url`` per
    endpoint URL, else the standard chain or ``profile``), the table (``table_keys`` for DynamoDB
    Local), no metrics (there is no CloudWatch to read EMF), a spool directory; ``settings`` are
    further :class:`Deps` fields (clock, upload, defaults, event_skew...). ``store`` replaces the
    table (an ad-hoc run's adapters/memtable.py)."""
    from replmon.adapters.metrics import NullMetrics
    from replmon.adapters.s3 import S3Stores
    from replmon.adapters.spool import DirectorySpool

    store = store or latency_table(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, keys=table_keys)
    settings.setdefault("leases", run_leases(store))
    settings.setdefault("registry", local_registry(store))
    return Deps(stores=S3Stores(keys, by_url=by_url, profile=profile), store=store, metrics=NullMetrics(),
                spool=DirectorySpool(spool_dir) if spool_dir is not None else None, **settings)


def preflight_deps(*, table: str, dynamodb_endpoint: str | None = None, region: str | None = None, profile: str | None = None,
                   keys: tuple[str, str] | None = None, by_url: Mapping[str, tuple[str, str]] | None = None,
                   store: LatencyTable | None = None) -> Deps:
    """The same endpoints as :func:`local_deps`, each call made once with short timeouts: a wrong
    URL, key or table is reported within seconds, before anything is written."""
    from replmon.adapters.clients import PREFLIGHT
    from replmon.adapters.metrics import NullMetrics
    from replmon.adapters.s3 import S3Stores

    return Deps(stores=S3Stores(keys, by_url=by_url, profile=profile, data=PREFLIGHT, control=PREFLIGHT),
                store=store or latency_table(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, call="preflight"),
                metrics=NullMetrics())


# ---------------------------------------------------------------------------------------- injection
DepsSource = Deps | Mapping[str, Deps]
_injected: list[DepsSource] = []
_from_env: Deps | None = None


def for_function(function_name: str) -> Deps:
    """What the handler of ``function_name`` runs with: the innermost injection that covers it,
    else the environment's wiring (built once per execution environment, as Lambda reuses it)."""
    global _from_env
    for source in reversed(_injected):
        if isinstance(source, Deps):
            return source
        if function_name in source:
            return source[function_name]
    if _from_env is None:
        _from_env = from_env()
    return _from_env


@contextmanager
def injected(source: DepsSource) -> Iterator[DepsSource]:
    """Handlers get ``source`` (one :class:`Deps` for every function, or a function name -> Deps
    mapping for those it names) until the block ends. The one way tests, the local runner and the
    lab replace dependencies; a mapping may be changed while it is injected (the lab re-points
    IngestEvents at each chaos route)."""
    _injected.append(source)
    try:
        yield source
    finally:
        del _injected[max(i for i, s in enumerate(_injected) if s is source)]
