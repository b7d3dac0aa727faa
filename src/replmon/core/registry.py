"""The route registry's item: one route the fleet measures, how, and why (docs/design/fleet.md 1-2).

Registry items live in the one table, one partition per RouteGroup (``#routes/g00``, sort key =
the route name; core/partitions.py). A route's group is a hash of its name, so a lookup by name
is one GetItem:

>>> group_of("dr-orders", 1), group_of("dr-orders", 8)
('g00', 'g02')
>>> registry_partition(group_of("dr-orders", 8))
'#routes/g02'

:class:`RouteSpec` is the item (pydantic, unknown fields refused; the CLI validates explicit
routes with it, the inventory writes discovered ones); :class:`RouteVerdict` says whether the route is
probed, and :class:`Reason` why not, each with the sentence that fixes it:

>>> spec = load_route_spec({"name": "dr-orders", "group": "g00", "origin": "explicit",
...     "source": {"account": "111122223333", "region": "ap-northeast-1", "bucket": "orders"},
...     "destinations": [{"account": "444455556666", "region": "ap-southeast-1", "bucket": "orders-dr", "rule_id": "dr"}]})
>>> spec.verdict.mode, spec.probing
(<Mode.PROBE: 'probe'>, True)
>>> spec.to_route("replmon").destinations[0].role_arn
'arn:aws:iam::444455556666:role/replmon-prober'
>>> Reason.FILTER_EXCLUDES_PREFIX.mode
<Mode.PASSIVE: 'passive'>
"""

from __future__ import annotations

import logging
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from replmon.core.cadence import ClassSpec, ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError, config_error, describe
from replmon.core.names import (
    KMS_KEY_ARN_RE,
    check_account,
    check_bucket,
    check_endpoint_url,
    check_prefix,
    check_region,
    check_role_arn,
    check_route_name,
)
from replmon.core.partitions import registry_partition
from replmon.core.record import PARTITION_KEY, SORT_KEY
from replmon.core.route import Destination, Endpoint, Route
from replmon.core.telemetry import REASON, ROUTE, ROUTE_GROUP

__all__ = [
    "GROUP_RE",
    "INVALID_ROUTE",
    "MAX_ROUTES_PER_GROUP",
    "MAX_ROUTE_GROUPS",
    "MEMBER_ROLES",
    "DestinationSpec",
    "EventsWiring",
    "GroupRead",
    "InvalidRoute",
    "InventoryObservation",
    "Mode",
    "Origin",
    "ProbeSpec",
    "Reason",
    "RegistryRead",
    "RouteSlo",
    "RouteSpec",
    "RouteVerdict",
    "SourceSpec",
    "bucket_index",
    "group_names",
    "group_of",
    "load_route_spec",
    "member_role_arn",
    "note_invalid",
    "parse_item",
    "read_group",
    "read_registry",
    "registry_partition",
]

#: ``RouteGroups`` is 1..8 (8 x 15 Metrics Insights alarms = 120 <= the 200 per account and Region).
MAX_ROUTE_GROUPS = 8
#: A Metrics Insights alarm evaluates at most 500 series: a group holds at most 500 routes.
MAX_ROUTES_PER_GROUP = 500
GROUP_RE = r"^g0[0-7]$"
#: The member-account roles the hub assumes (templates/member-account.yaml): ``<MemberRolePrefix>-<kind>``.
MEMBER_ROLES = ("inventory", "prober", "reader")


def group_of(name: str, groups: int) -> str:
    """The RouteGroup of a route: ``g`` + crc32(name) mod ``RouteGroups``, two digits."""
    if not 1 <= groups <= MAX_ROUTE_GROUPS:
        raise ConfigError(f"RouteGroups: {groups} is not 1..{MAX_ROUTE_GROUPS}")
    return f"g{zlib.crc32(name.encode()) % groups:02d}"


def group_names(groups: int) -> list[str]:
    """Every group of a deployment with ``RouteGroups = groups``: ``['g00', 'g01', ...]``."""
    group_of("", groups)  # validates
    return [f"g{i:02d}" for i in range(groups)]


def member_role_arn(account: str, prefix: str, kind: str, partition: str = "aws") -> str:
    """``arn:aws:iam::<account>:role/<prefix>-<kind>``; kind one of :data:`MEMBER_ROLES`."""
    if kind not in MEMBER_ROLES:
        raise ValueError(f"member role kind {kind!r} is not one of {MEMBER_ROLES}")
    return f"arn:{partition}:iam::{account}:role/{prefix}-{kind}"


class Mode(StrEnum):
    PROBE = "probe"  # probes, heartbeats, S3's metrics and events
    PASSIVE = "passive"  # S3's metrics and events only: RPO/SLO without probes or heartbeats
    OFF = "off"  # listed, not measured


class Origin(StrEnum):
    EXPLICIT = "explicit"  # written by a person (replmon fleet put) or the stack: wins over discovery
    DISCOVERED = "discovered"  # written by the inventory; never overwrites an explicit route


_FIXES: dict[str, tuple[Mode, str]] = {
    "OK": (Mode.PROBE, "an enabled rule to every destination replicates the probe prefix; nothing to fix"),
    "OPTED_OUT": (Mode.PASSIVE, "the source bucket carries the opt-out tag (OptOutTag, default replmon:probe=off); "
                                "remove the tag to probe it"),
    "RULE_DISABLED": (Mode.PASSIVE, "the only rule that covers the probe prefix is Disabled; enable it or add an "
                                    "enabled rule for the probe prefix"),
    "FILTER_EXCLUDES_PREFIX": (Mode.PASSIVE, "no enabled rule's filter prefix is a prefix of the probe prefix; add a rule "
                                             "for the probe prefix (e.g. Filter.Prefix 'replmon-probes/')"),
    "TAG_FILTER": (Mode.PASSIVE, "the covering rule filters on tags and probes carry none; register an explicit route "
                                 "with probe.tags (the prober role then needs s3:PutObjectTagging: AllowProbeTags=true)"),
    "KMS_OBJECTS_NOT_REPLICATED": (Mode.PASSIVE, "the bucket encrypts with SSE-KMS by default and the rule lacks "
                                                 "SourceSelectionCriteria.SseKmsEncryptedObjects Enabled; enable it"),
    "DESTINATION_NOT_MEMBER": (Mode.PASSIVE, "the destination account has no replmon member roles, so replicas cannot be "
                                             "verified or cleaned; deploy templates/member-account.yaml there and add "
                                             "the account to MemberAccounts"),
    "DESTINATION_MISSING": (Mode.OFF, "a rule replicates to a bucket that does not exist (HeadBucket 404), so "
                                      "replication to it fails; create the bucket or fix the rule's Destination"),
    "ACCESS_DENIED": (Mode.OFF, "the inventory role was denied the read the reason names; allow it for "
                                "<MemberRolePrefix>-inventory (templates/member-account.yaml) or in the bucket policy"),
    "ASSUME_ROLE_DENIED": (Mode.OFF, "the hub could not assume the account's inventory role; deploy "
                                     "templates/member-account.yaml there with HubAccountId (and MemberExternalId)"),
    "SUPERSEDED": (Mode.OFF, "an explicit route probes this source bucket; nothing to fix (delete the explicit "
                             "route to probe the discovered one)"),
    "NOT_ENROLLED": (Mode.OFF, "found, not enrolled: probes are opt-in; tag the source bucket with the enroll tag "
                               "(REPLMON_FLEET enroll_tag, default replmon:enroll=true) or write the route with "
                               "replmon fleet put"),
}


class Reason(StrEnum):
    """Why a route is (not) probed: ``mode`` it implies and ``fix``, the sentence a user acts on."""

    OK = "OK"
    OPTED_OUT = "OPTED_OUT"
    RULE_DISABLED = "RULE_DISABLED"
    FILTER_EXCLUDES_PREFIX = "FILTER_EXCLUDES_PREFIX"
    TAG_FILTER = "TAG_FILTER"
    KMS_OBJECTS_NOT_REPLICATED = "KMS_OBJECTS_NOT_REPLICATED"
    DESTINATION_NOT_MEMBER = "DESTINATION_NOT_MEMBER"
    DESTINATION_MISSING = "DESTINATION_MISSING"
    ACCESS_DENIED = "ACCESS_DENIED"
    ASSUME_ROLE_DENIED = "ASSUME_ROLE_DENIED"  # an account-level reason (#inventory/accounts)
    SUPERSEDED = "SUPERSEDED"
    NOT_ENROLLED = "NOT_ENROLLED"  # discovered, its bucket not enrolled (fleet/inventory.py)

    @property
    def mode(self) -> Mode:
        return _FIXES[self.value][0]

    @property
    def fix(self) -> str:
        return _FIXES[self.value][1]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class RouteVerdict(_Strict):
    """Whether the route is probed; ``reason`` is the specific text (defaults to the reason's fix)."""

    mode: Mode = Mode.PROBE
    reason_code: Reason = Reason.OK
    reason: str = ""
    checked_at: float | None = None

    @classmethod
    def of(cls, code: Reason, detail: str = "", checked_at: float | None = None) -> RouteVerdict:
        return cls(mode=code.mode, reason_code=code, reason=detail or code.fix, checked_at=checked_at)

    @model_validator(mode="after")
    def _consistent(self) -> RouteVerdict:
        if self.mode is not self.reason_code.mode:
            raise ValueError(f"mode {self.mode.value!r} does not go with reason_code {self.reason_code.value} "
                             f"(which means mode {self.reason_code.mode.value!r}); fix one of them")
        if not self.reason:
            self.reason = self.reason_code.fix
        return self


def _kms_arn(value: str | None, field: str) -> str | None:
    if value is not None and not re.fullmatch(KMS_KEY_ARN_RE, value):
        raise ValueError(f"{field} must be a full KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), not an alias "
                         "or a key id: S3 and IAM policies match the key ARN")
    return value


class _Bucket(_Strict):
    """A bucket where it lives: account, Region, name (a route's source or one destination)."""

    account: str
    region: str
    bucket: str

    _account = field_validator("account")(check_account)
    _region = field_validator("region")(check_region)
    _bucket = field_validator("bucket")(check_bucket)


class SourceSpec(_Bucket):
    kms_key_arn: str | None = None  # the bucket's default SSE-KMS key (probes are written with it)
    endpoint_url: str | None = None  # S3-compatible servers (the lab) only

    _url = field_validator("endpoint_url")(check_endpoint_url)

    @field_validator("kms_key_arn")
    @classmethod
    def _kms(cls, value: str | None) -> str | None:
        return _kms_arn(value, "kms_key_arn")


class DestinationSpec(_Bucket):
    rule_id: str | None = None
    priority: int | None = None
    rtc: bool = False
    metrics: bool = False
    storage_class: str | None = None
    replica_kms_key_arn: str | None = None
    endpoint_url: str | None = None
    # The stack's own route only (``managed_by: stack``): the DestinationRoleArn parameter, assumed to
    # reach a destination in another account; other routes reach it through the member prober role.
    role_arn: str | None = None

    _url = field_validator("endpoint_url")(check_endpoint_url)
    _role = field_validator("role_arn")(check_role_arn)

    @field_validator("replica_kms_key_arn")
    @classmethod
    def _kms(cls, value: str | None) -> str | None:
        return _kms_arn(value, "replica_kms_key_arn")


class ProbeSpec(_Strict):
    """A route's probe settings; absent (``probe: null``) = the fleet's (template parameters)."""

    classes: dict[str, ClassSpec] | None = None  # None: the fleet's ProbeClasses
    max_concurrency: int = Field(default=DEFAULTS.route_max_concurrency, ge=1, le=DEFAULTS.fleet_max_probes)
    timeout_seconds: int = Field(default=DEFAULTS.timeout_seconds, ge=60, le=86_400)
    heartbeat: bool = True
    tags: dict[str, str] = Field(default_factory=dict, max_length=10)  # S3 allows 10 tags per object

    @field_validator("classes")
    @classmethod
    def _classes(cls, value: dict[str, ClassSpec] | None) -> dict[str, ClassSpec] | None:
        if value is not None:
            ProbeClasses.from_specs(value)  # sizes, duplicates, <= 200 probes per route-run
        return value


class RouteSlo(_Strict):
    threshold_seconds: float = Field(default=DEFAULTS.target_seconds, gt=0)
    target_percent: float = Field(default=round(DEFAULTS.slo_target * 100, 6), ge=50, lt=100)


EventState = Literal["wired", "missing", "unknown"]


class EventsWiring(_Strict):
    """Do the buckets notify the route's events topic (the inventory reads their notification configuration)?"""

    source: EventState = "unknown"
    destinations: dict[str, EventState] = Field(default_factory=dict)  # by destination bucket


class InventoryObservation(_Strict):
    seen_at: float
    run_id: str
    observed: dict[str, Any] = Field(default_factory=dict)  # what the inventory saw (kept on explicit routes too)


class RouteSpec(_Strict):
    """A registry item (docs/design/fleet.md 1). Storage keys (``route``, ``at``) are added by :meth:`to_item`."""

    name: str
    group: str = Field(pattern=GROUP_RE)
    origin: Origin
    version: int = Field(default=0, ge=0)  # explicit edits: conditional on the version read
    managed_by: Literal["stack"] | None = None  # the hub stack's own (legacy parameters) route
    source: SourceSpec
    destinations: list[DestinationSpec]
    prefix: str = DEFAULTS.probe_prefix
    seed_prefix: str = DEFAULTS.seed_prefix
    probe: ProbeSpec | None = None
    slo: RouteSlo | None = None
    verdict: RouteVerdict = Field(default_factory=RouteVerdict)
    verdict_observed: RouteVerdict | None = None  # inventory's verdict on an explicit route (drift, shown by replmon fleet)
    events: EventsWiring = Field(default_factory=EventsWiring)
    opt_out: bool = False
    inventory: InventoryObservation | None = None
    superseded_by: str | None = None
    replication_metrics_account: Literal["source", "destination"] = "source"

    _name = field_validator("name")(check_route_name)
    _prefix = field_validator("prefix", "seed_prefix")(check_prefix)

    @field_validator("destinations")
    @classmethod
    def _dests(cls, value: list[DestinationSpec]) -> list[DestinationSpec]:
        if not value:
            raise ValueError('at least one destination is required, e.g. [{"account": "...", "region": "...", "bucket": "dr"}]')
        buckets = [d.bucket for d in value]
        twice = sorted({b for b in buckets if buckets.count(b) > 1})
        if twice:
            raise ValueError(f"destination bucket {', '.join(twice)} listed twice; one entry per destination bucket")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RouteSpec:
        if self.managed_by is None and any(d.role_arn for d in self.destinations):
            raise ValueError("destinations[].role_arn is the stack's own route's (DestinationRoleArn); other routes reach a "
                             "destination through its account's member prober role: remove role_arn")
        if (self.superseded_by is not None) != (self.verdict.reason_code is Reason.SUPERSEDED):
            raise ValueError("superseded_by is set exactly when verdict.reason_code is SUPERSEDED; set both or neither")
        if self.opt_out and self.verdict.mode is Mode.PROBE:
            raise ValueError("opt_out: an opted-out route cannot have verdict mode 'probe'; use verdict.reason_code OPTED_OUT")
        return self

    @property
    def probing(self) -> bool:
        """Probed (and heartbeated, unless ``probe.heartbeat`` is false) by the fleet."""
        return self.verdict.mode is Mode.PROBE

    @property
    def heartbeat(self) -> bool:
        return self.probing and (self.probe is None or self.probe.heartbeat)

    def classes(self, fleet: ProbeClasses) -> ProbeClasses:
        """The route's size classes: its own override, else the fleet's."""
        if self.probe is None or self.probe.classes is None:
            return fleet
        return ProbeClasses.from_specs(self.probe.classes)

    def to_route(self, member_role_prefix: str | None = DEFAULTS.member_role_prefix, partition: str = "aws") -> Route:
        """The probes' :class:`Route`. Each endpoint gets its account's ``<prefix>-prober`` role;
        ``member_role_prefix=None``: the caller's own credentials (the lab's MinIO users, tests). The
        stack's own route (``managed_by: stack``) is reached as template.yaml grants it: the functions'
        own credentials, and a destination's ``role_arn`` (DestinationRoleArn) where one is set."""
        stack = self.managed_by == "stack"

        def role(account: str) -> str | None:
            return member_role_arn(account, member_role_prefix, "prober", partition) if member_role_prefix and not stack else None

        s = self.source
        return Route(
            name=self.name, prefix=self.prefix, seed_prefix=self.seed_prefix,
            source=Endpoint(bucket=s.bucket, region=s.region, endpoint_url=s.endpoint_url, account=s.account, role_arn=role(s.account),
                            kms_key_arn=s.kms_key_arn),
            destinations=[Destination(bucket=d.bucket, region=d.region, endpoint_url=d.endpoint_url, account=d.account,
                                      role_arn=d.role_arn or role(d.account), rule_id=d.rule_id) for d in self.destinations],
        )

    def to_item(self) -> dict[str, Any]:
        """The table item: the model's JSON plus the registry keys."""
        item: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        item[PARTITION_KEY] = registry_partition(self.group)
        item[SORT_KEY] = self.name
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> RouteSpec:
        data = {k: v for k, v in item.items() if k not in (PARTITION_KEY, SORT_KEY)}
        return load_route_spec(data)


def load_route_spec(data: Mapping[str, Any]) -> RouteSpec:
    """Validate a registry item or an explicit route file; :class:`ConfigError` names every bad field."""
    try:
        return RouteSpec.model_validate(data)
    except ValidationError as exc:
        raise config_error(f"route {data.get('name', '(unnamed)')!s}", exc) from None


def bucket_index(specs: Iterable[RouteSpec]) -> dict[str, list[str]]:
    """Bucket -> names of the measured routes it is the source or a destination of (IngestEvents
    maps an event's bucket to routes with it; routes in mode ``off`` are left out)."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        if spec.verdict.mode is Mode.OFF:
            continue
        for bucket in (spec.source.bucket, *(d.bucket for d in spec.destinations)):
            names = out.setdefault(bucket, [])
            if spec.name not in names:
                names.append(spec.name)
    return out


# ------------------------------------------------------------------------------ a bad item is isolated
log = logging.getLogger("replmon")
#: The finding's metric (core/telemetry.py; the InvalidRouteGNN ticket alarms read it per route).
INVALID_ROUTE = "InvalidRoute"
#: ``InvalidRoute{Reason}``: why a registry item is not a route (the metric's dimension, a bounded set).
INVALID_REASONS = ("MissingField", "BadName", "BadField", "UnknownField", "ReadFailed")


@dataclass(frozen=True)
class InvalidRoute:
    """A registry item no reader can use: skipped by every reader, with this finding (planner:
    ``InvalidRoute{Route, Reason}`` and its ticket; ``replmon fleet``: a line naming the item and field).

    ``name`` is the item's sort key (always present, even when the ``name`` attribute is not);
    ``field`` the first refused field (dotted path); ``detail`` every refused field with its fix.
    """

    group: str
    name: str
    reason: str  # one of INVALID_REASONS
    field: str
    detail: str

    def line(self) -> str:
        """What ``replmon fleet`` prints: the item, the field, and the fix."""
        return f"registry item {self.name!r} in {self.group} skipped ({self.reason}): {self.detail}"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "group": self.group, "reason": self.reason, "field": self.field, "detail": self.detail}


@dataclass(frozen=True)
class GroupRead:
    """One group of the registry as read: the valid routes, and the items skipped with their reason."""

    routes: list[RouteSpec] = field(default_factory=list)
    invalid: list[InvalidRoute] = field(default_factory=list)


def _reason(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "missing":
        return "MissingField"
    if err["type"] == "extra_forbidden":
        return "UnknownField"
    return "BadName" if loc[:1] == ("name",) else "BadField"


def parse_item(group: str, item: Mapping[str, Any]) -> RouteSpec | InvalidRoute:
    """A registry item (plain attributes, keys included) as its :class:`RouteSpec`, or the
    :class:`InvalidRoute` that says which field is wrong and how to fix it:

    >>> bad = parse_item("g00", {"route": "#routes/g00", "at": "old..name", "name": "old..name", "group": "g00",
    ...     "origin": "explicit", "source": {"account": "111122223333", "region": "us-east-1", "bucket": "a"}})
    >>> bad.reason, bad.field
    ('BadName', 'name')
    """
    sk = str(item.get(SORT_KEY) or item.get("name") or "(unnamed)")
    data = {k: v for k, v in item.items() if k not in (PARTITION_KEY, SORT_KEY)}
    try:
        return RouteSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        return InvalidRoute(group=group, name=sk, reason=_reason(first), field=".".join(str(p) for p in first["loc"]) or "(item)",
                            detail="; ".join(describe(e).strip() for e in errors))


def read_group(store: Any, group: str) -> GroupRead:
    """``store.read(group)`` where the store has it, else its ``routes(group)`` (a store that cannot
    name invalid items: a dry-run preview, a test's registry)."""
    read = getattr(store, "read", None)
    return read(group) if callable(read) else GroupRead(routes=list(store.routes(group)))


@dataclass(frozen=True)
class RegistryRead:
    """The registry as every reader gets it: the valid routes of the groups read, and one finding per
    item skipped (an invalid item, or a group whose read failed: ``ReadFailed`` named by the group's
    partition). Readers act on ``routes`` and report ``invalid``; nothing is dropped silently."""

    routes: list[RouteSpec] = field(default_factory=list)
    invalid: list[InvalidRoute] = field(default_factory=list)

    @property
    def unread(self) -> list[str]:
        """The groups whose read failed (their routes are not in ``routes``)."""
        return [b.group for b in self.invalid if b.reason == "ReadFailed" and b.field == "(query)"]


def read_registry(store: Any, groups: Iterable[str], explain: Callable[[Exception], str] | None = None) -> RegistryRead:
    """Every group of ``groups``, each item parsed on its own (:func:`read_group`): the one way every
    reader (PlanProbes, the Heartbeat, CollectSignals, IngestEvents, Report, ``replmon fleet``) reads
    the registry, so a bad item or a throttled group costs only itself. A group whose read fails is a
    ``ReadFailed`` finding; when every group fails it is the table, not a group, and the first error
    is raised (the caller fails as it would without a registry).

    >>> class Store:
    ...     def routes(self, group):
    ...         if group == "g01":
    ...             raise TimeoutError("throttled")
    ...         return []
    >>> read = read_registry(Store(), ["g00", "g01"])
    >>> read.unread, read.invalid[0].line()
    (['g01'], "registry item '#routes/g01' in g01 skipped (ReadFailed): TimeoutError: throttled")
    """
    out = RegistryRead()
    names = list(groups)
    failed: list[Exception] = []
    for group in names:
        try:
            read = read_group(store, group)
        except Exception as exc:  # throttled or denied: this group's routes wait for the next read, the others are read
            detail = explain(exc) if explain is not None else f"{type(exc).__name__}: {exc}"
            out.invalid.append(InvalidRoute(group, registry_partition(group), "ReadFailed", "(query)", detail))
            failed.append(exc)
            continue
        out.routes.extend(read.routes)
        out.invalid.extend(read.invalid)
    if failed and len(failed) == len(names):
        raise failed[0]
    return out


def note_invalid(metrics: Any, bad: InvalidRoute) -> None:
    """Count and log one skipped registry item or unreadable route: ``InvalidRoute{RouteGroup, Route,
    Reason}`` on ``metrics`` (a MetricsSink; the ticket alarm per route) and an error line naming the
    item, the field and the fix."""
    log.error("registry item skipped: " + bad.line(), extra={"route": bad.name, "group": bad.group, "reason": bad.reason,
                                                              "field": bad.field})
    metrics.count(INVALID_ROUTE, dimensions={ROUTE_GROUP: bad.group, ROUTE: bad.name, REASON: bad.reason})
