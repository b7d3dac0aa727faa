"""The inventory: every replicated bucket of every account, as registry routes (docs/design/fleet.md 3).

One run: move routes whose group changed (``RouteGroups``), index the explicit routes by source
bucket, then per account (fleet/accounts.py) assume its inventory role, list its buckets page by
page (``ListBuckets`` with ``MaxBuckets``: S3 then returns each ``BucketRegion``) and read each
bucket in its Region, ``workers`` at a time: GetBucketReplication (none: not a route, counted),
GetBucketTagging (the enroll and opt-out tags; a bucket without tags answers ``NoSuchTagSet``, read
as no tags), GetBucketEncryption (SSE-KMS). fleet/discovery.py decides the rules; :func:`verdict`
the :class:`Reason`. Probes are opt-in: a discovered route is probed only when its source bucket
carries the enroll tag (REPLMON_FLEET ``enroll_tag``); the rest are listed as ``NOT_ENROLLED``
("found, not enrolled", mode ``off``), with what would stop probes once enrolled. Every replicated
bucket becomes a route, probed or not, with its reason; an account whose role cannot be assumed, or a bucket whose configuration cannot
be read, is an ``#inventory/accounts`` row naming the refused action. Nothing is skipped silently.

**Deadline**: before each ListBuckets page the run checks the clock; past ``deadline`` it writes
``#inventory/checkpoint`` (account, ContinuationToken, the account's counts so far) and returns
``complete = False``; the next run resumes there.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replmon.core.defaults import DEFAULTS
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import RUN_STAMP
from replmon.core.names import KMS_KEY_ARN_RE
from replmon.core.ports import AccessDenied, BucketMissing, BucketReader, InventoryStore, MemberAccounts, RegistryStore
from replmon.core.registry import (
    DestinationSpec,
    InventoryObservation,
    Origin,
    Reason,
    RouteSpec,
    RouteVerdict,
    SourceSpec,
    group_of,
)
from replmon.fleet.accounts import InventorySettings, account_list
from replmon.fleet.discovery import Discovery, RuleRoute, discover
from replmon.fleet.registrar import all_routes, explicit_sources, move_groups, register_discovered, supersede

log = logging.getLogger(__name__)

#: Counts kept per account row (and carried in a checkpoint).
T = TypeVar("T")

#: How long after a run's deadline its lease still stands if it died (Lambda's own timeout is past by then).
RUN_LEASE_MARGIN_SECONDS = 120.0
COUNTS = ("buckets", "replicated", "not_replicated", "routes", "observed", "denied")


@dataclass
class InventoryDeps:
    registry: RegistryStore
    rows: InventoryStore
    members: MemberAccounts
    hub_account: str
    settings: InventorySettings = field(default_factory=InventorySettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    probe_prefix: str = DEFAULTS.probe_prefix
    clock: Callable[[], float] = time.time


@dataclass
class InventorySummary:
    run_id: str
    complete: bool = True
    moved: list[str] = field(default_factory=list)
    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)
    reasons: Counter[str] = field(default_factory=Counter)
    routes: list[RouteSpec] = field(default_factory=list)  # every route written or observed, in order
    held_by: dict[str, Any] | None = None  # another run's lease stood: this run did nothing

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "complete": self.complete, "moved": self.moved, "accounts": self.accounts,
                "reasons": dict(sorted(self.reasons.items())), "routes": len(self.routes), "held_by": self.held_by}


@dataclass
class BucketResult:
    """What one bucket gave: a route, "not replicated", or a denied read."""

    bucket: str
    route: RouteSpec | None = None
    not_replicated: bool = False
    denied: dict[str, str] | None = None  # {"bucket", "action", "reason"} (+ "code": a Reason other than ACCESS_DENIED)


def _arn(value: str | None) -> str | None:
    return value if value and re.fullmatch(KMS_KEY_ARN_RE, value) else None


def _raw_rules(config: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(r.get("ID", "")): r for r in config.get("Rules", [])}


def _covers_prefix(rule: RuleRoute, probe_prefix: str) -> bool:
    return rule.prefix is None or probe_prefix.startswith(rule.prefix)


def _kms_replicated(raw: Mapping[str, Any]) -> bool:
    criteria = (raw.get("SourceSelectionCriteria") or {}).get("SseKmsEncryptedObjects") or {}
    return criteria.get("Status") == "Enabled"


def verdict(found: Discovery, raw_config: Mapping[str, Any], *, probe_prefix: str, opted_out: bool, kms_key: str | None,
            members: Sequence[str], source_account: str, denied: str | None, now: float,
            enrolled: bool, enroll_tag: str = DEFAULTS.enroll_tag) -> tuple[RouteVerdict, list[RuleRoute]]:
    """The route's verdict and the rules that make its destinations (the chosen ones when it can be
    probed, else every rule's first per destination bucket, so a passive route still names them).

    Order: opt-out (the owner's choice), a refused read (the tags may be unread), not enrolled
    (saying what the rules would give once enrolled), the rules (disabled, tag filter, prefix),
    SSE-KMS objects not replicated, a destination outside the member accounts."""
    chosen = [r for r in found.rules if r.chosen]
    rules = chosen or list({r.destination_bucket: r for r in reversed(found.rules)}.values())[::-1]
    if opted_out:
        return RouteVerdict.of(Reason.OPTED_OUT, checked_at=now), rules
    if denied:
        return RouteVerdict.of(Reason.ACCESS_DENIED, f"{denied} was denied to the inventory role; {Reason.ACCESS_DENIED.fix}", now), rules
    inner = _rules_verdict(found, raw_config, chosen, probe_prefix=probe_prefix, kms_key=kms_key, members=members,
                           source_account=source_account, now=now)
    if not enrolled:
        then = "it would be probed" if inner.reason_code is Reason.OK else f"it would stay unprobed: {inner.reason_code.value}, {inner.reason}"
        return RouteVerdict.of(Reason.NOT_ENROLLED, f"found, not enrolled: the source bucket lacks the tag {enroll_tag} "
                               f"(or write the route with replmon fleet put); once enrolled {then}", now), rules
    return inner, rules


def _rules_verdict(found: Discovery, raw_config: Mapping[str, Any], chosen: Sequence[RuleRoute], *, probe_prefix: str,
                   kms_key: str | None, members: Sequence[str], source_account: str, now: float) -> RouteVerdict:
    """What the replication rules, the encryption and the destination accounts say (an enrolled bucket's verdict)."""
    if not chosen:
        enabled = [r for r in found.rules if r.status == "Enabled" and _covers_prefix(r, probe_prefix)]
        if any(r.tags for r in enabled):
            tagged = next(r for r in enabled if r.tags)
            return RouteVerdict.of(Reason.TAG_FILTER, f"rule {tagged.rule_id!r} replicates only objects tagged {tagged.tags}; "
                                   f"{Reason.TAG_FILTER.fix}", now)
        disabled = [r for r in found.rules if r.status != "Enabled" and r.covers_probes]
        if disabled:
            return RouteVerdict.of(Reason.RULE_DISABLED, f"rule {disabled[0].rule_id!r} covers {probe_prefix!r} but is "
                                   f"{disabled[0].status}; {Reason.RULE_DISABLED.fix}", now)
        prefixes = sorted({repr(r.prefix) for r in found.rules if r.prefix is not None})
        return RouteVerdict.of(Reason.FILTER_EXCLUDES_PREFIX, f"the rules replicate only {', '.join(prefixes) or 'tagged objects'}, "
                               f"not {probe_prefix!r}; {Reason.FILTER_EXCLUDES_PREFIX.fix}", now)
    raw = _raw_rules(raw_config)
    if kms_key:
        lacking = [r.rule_id for r in chosen if not _kms_replicated(raw.get(r.rule_id, {}))]
        if lacking:
            return RouteVerdict.of(Reason.KMS_OBJECTS_NOT_REPLICATED, f"default encryption is SSE-KMS and rule "
                                   f"{', '.join(map(repr, lacking))} lacks SseKmsEncryptedObjects Enabled; "
                                   f"{Reason.KMS_OBJECTS_NOT_REPLICATED.fix}", now)
    outside = sorted({r.account or source_account for r in chosen} - set(members))
    if outside:
        return RouteVerdict.of(Reason.DESTINATION_NOT_MEMBER, f"destination account {', '.join(outside)} is not inventoried; "
                               f"{Reason.DESTINATION_NOT_MEMBER.fix}", now)
    return RouteVerdict.of(Reason.OK, checked_at=now)


def _allowed(call: Callable[[], T], default: T, denied: str | None) -> tuple[T, str | None]:
    """``call()``, or ``default`` and the first refused action when the read is denied."""
    try:
        return call(), denied
    except AccessDenied as exc:
        return default, denied or exc.action


def inspect_bucket(reader: BucketReader, bucket: str, region: str | None, *, settings: InventorySettings, probe_prefix: str,
                   groups: int, members: Sequence[str], run_id: str, now: float,
                   enroll_tag: str = DEFAULTS.enroll_tag) -> BucketResult:
    """Read one bucket and build its discovered route (or say why there is none); ``enroll_tag``
    (``key=value``, REPLMON_FLEET's) on the bucket enrolls the route for probes."""
    try:
        region = region or reader.bucket_region(bucket)
        config = reader.replication(bucket, region)
    except AccessDenied as exc:
        return BucketResult(bucket, denied={"bucket": bucket, "action": exc.action, "reason": str(exc)})
    except BucketMissing:  # deleted between ListBuckets and now: nothing to measure
        return BucketResult(bucket, not_replicated=True)
    if config is None:
        return BucketResult(bucket, not_replicated=True)
    denied: str | None = None
    no_tags: dict[str, str] = {}
    kms_key: str | None = None
    try:  # each read on its own: a refusal names its action and the other read still answers
        tags, denied = _allowed(lambda: reader.tags(bucket, region), no_tags, denied)
        kms_key, denied = _allowed(lambda: reader.default_kms_key(bucket, region), None, denied)
    except BucketMissing:  # deleted between ListBuckets and now: nothing to measure
        return BucketResult(bucket, not_replicated=True)
    found = discover(bucket, config, probe_prefix)
    opted_out = settings.opted_out(tags)
    key, _, value = enroll_tag.partition("=")
    enrolled = tags.get(key) == value
    v, rules = verdict(found, config, probe_prefix=probe_prefix, opted_out=opted_out, kms_key=kms_key, members=members,
                       source_account=reader.account, denied=denied, now=now, enrolled=enrolled, enroll_tag=enroll_tag)
    if not rules:
        return BucketResult(bucket, denied={"bucket": bucket, "action": "s3:GetReplicationConfiguration",
                                            "reason": "the replication configuration names no destination"})
    raw = _raw_rules(config)
    dests = []
    try:
        for r in rules:
            enc = (raw.get(r.rule_id, {}).get("Destination") or {}).get("EncryptionConfiguration") or {}
            dests.append(DestinationSpec(account=r.account or reader.account, region=reader.bucket_region(r.destination_bucket),
                                         bucket=r.destination_bucket, rule_id=r.rule_id or None, priority=r.priority, rtc=r.rtc,
                                         metrics=r.metrics, storage_class=r.storage_class,
                                         replica_kms_key_arn=_arn(enc.get("ReplicaKmsKeyID"))))
    except AccessDenied as exc:
        return BucketResult(bucket, denied={"bucket": bucket, "action": exc.action, "reason": f"destination Region: {exc}"})
    except BucketMissing as exc:  # replication to it fails: named as its own reason, not as a refused read
        return BucketResult(bucket, denied={"bucket": bucket, "action": "s3:ListBucket", "reason": f"destination {exc}; "
                                            f"{Reason.DESTINATION_MISSING.fix}", "code": Reason.DESTINATION_MISSING.value})
    observed = {"rules": [r.to_json() for r in found.rules], "notes": found.notes, "default_kms_key": kms_key,
                "opt_out_tag": settings.opt_out_tag if opted_out else None, "enroll_tag": enroll_tag if enrolled else None}
    spec = RouteSpec(
        name=bucket, group=group_of(bucket, groups), origin=Origin.DISCOVERED,
        source=SourceSpec(account=reader.account, region=region, bucket=bucket, kms_key_arn=_arn(kms_key)),
        destinations=dests, prefix=probe_prefix, verdict=v, opt_out=opted_out,
        inventory=InventoryObservation(seen_at=now, run_id=run_id, observed=observed),
    )
    return BucketResult(bucket, route=spec)


def survey_account(reader: BucketReader, *, settings: InventorySettings, probe_prefix: str, groups: int,
                   members: Sequence[str], now: float, enroll_tag: str = DEFAULTS.enroll_tag) -> list[BucketResult]:
    """Every bucket of one account, read as the inventory reads it, nothing written (``replmon routes --account``)."""
    out: list[BucketResult] = []
    token: str | None = None
    while True:
        page = reader.list_buckets(token)
        out += [inspect_bucket(reader, name, region, settings=settings, probe_prefix=probe_prefix, groups=groups, members=members,
                               run_id="survey", now=now, enroll_tag=enroll_tag) for name, region in page.buckets]
        token = page.next_token
        if not token:
            return out


def _new_counts() -> dict[str, Any]:
    return {k: 0 for k in COUNTS} | {"denied_reads": []}


def run_inventory(deps: InventoryDeps, now: float, deadline: float) -> InventorySummary:
    """One inventory run; stops at ``deadline`` (epoch seconds, read from ``deps.clock``) with a
    checkpoint. Runs one at a time: a run that finds another's lease standing (a scheduled run and
    ``replmon fleet inventory`` at once) does nothing and says whose it is (``held_by``); a run
    that died frees it ``RUN_LEASE_MARGIN_SECONDS`` after its deadline."""
    holder = f"{time.strftime(RUN_STAMP, time.gmtime(now))}-{uuid.uuid4().hex[:8]}"
    held = deps.rows.take_run(holder, now, deadline + RUN_LEASE_MARGIN_SECONDS)
    if held is not None:
        log.warning("another inventory run holds the lease (%s until %s): this run does nothing", held.get("holder"), held.get("until"))
        return InventorySummary("", complete=False, held_by=held)
    try:
        return _run(deps, now, deadline)
    finally:
        deps.rows.end_run(holder)


def _run(deps: InventoryDeps, now: float, deadline: float) -> InventorySummary:
    checkpoint = deps.rows.checkpoint()
    run_id = str(checkpoint["run_id"]) if checkpoint else time.strftime(RUN_STAMP, time.gmtime(now)) + "-inv"
    summary = InventorySummary(run_id)
    if not checkpoint:
        summary.moved = move_groups(deps.registry, deps.fleet.route_groups)
    explicit = explicit_sources(all_routes(deps.registry, deps.fleet.route_groups))
    organization = deps.members.organization_accounts if deps.settings.discover_organization else None
    accounts = account_list(deps.settings, deps.hub_account, organization)
    start = accounts.index(checkpoint["account"]) if checkpoint and checkpoint.get("account") in accounts else 0
    with ThreadPoolExecutor(max_workers=deps.settings.workers) as pool:
        for account in accounts[start:]:
            resumed = checkpoint is not None and checkpoint.get("account") == account
            token: str | None = checkpoint.get("token") if checkpoint and resumed else None
            counts = dict(checkpoint["counts"]) if checkpoint and resumed and "counts" in checkpoint else _new_counts()
            row: dict[str, Any] = {"seen_at": now, "run_id": run_id}
            try:
                reader = deps.members.open(account)
            except AccessDenied as exc:
                summary.reasons[Reason.ASSUME_ROLE_DENIED.value] += 1
                row |= {"status": Reason.ASSUME_ROLE_DENIED.value, "reason": f"{exc}; {Reason.ASSUME_ROLE_DENIED.fix}"}
                deps.rows.put_account(account, row)
                summary.accounts[account] = row
                log.warning("account %s: %s", account, row["reason"])
                continue
            status = Reason.OK.value
            while True:
                if deps.clock() >= deadline:
                    deps.rows.put_checkpoint({"account": account, "token": token, "run_id": run_id, "counts": counts})
                    summary.complete = False
                    log.warning("inventory %s stopped at its deadline in account %s; the next run resumes there", run_id, account)
                    return summary
                try:
                    page = reader.list_buckets(token)
                except AccessDenied as exc:
                    status = Reason.ACCESS_DENIED.value
                    row["reason"] = f"{exc}; {Reason.ACCESS_DENIED.fix}"
                    break
                futures = [pool.submit(inspect_bucket, reader, name, region, settings=deps.settings, probe_prefix=deps.probe_prefix,
                                       groups=deps.fleet.route_groups, members=accounts, run_id=run_id, now=now,
                                       enroll_tag=deps.fleet.enroll_tag)
                           for name, region in page.buckets]
                for res in (f.result() for f in futures):
                    _record(deps, res, explicit, counts, summary)
                token = page.next_token
                if not token:
                    break
            row |= {"status": status, **counts}
            deps.rows.put_account(account, row)
            summary.accounts[account] = row
            if checkpoint and resumed:
                checkpoint = None
    deps.rows.put_checkpoint(None)
    return summary


def _record(deps: InventoryDeps, res: BucketResult, explicit: Mapping[str, str], counts: dict[str, Any],
            summary: InventorySummary) -> None:
    counts["buckets"] += 1
    if res.not_replicated:
        counts["not_replicated"] += 1
        return
    if res.denied is not None:  # replicated or not is unknown: the row names the bucket and the action
        counts["denied"] += 1
        counts["denied_reads"].append(res.denied)
        summary.reasons[res.denied.get("code", Reason.ACCESS_DENIED.value)] += 1
        return
    counts["replicated"] += 1
    spec = res.route
    assert spec is not None
    holder = explicit.get(spec.source.bucket)
    if holder is not None and holder != spec.name:
        spec = supersede(spec, holder, spec.verdict.checked_at or 0.0)
    inventory = spec.inventory
    outcome = register_discovered(deps.registry, spec, inventory.run_id if inventory else summary.run_id,
                                  dict(inventory.observed) if inventory else {})
    counts["routes" if outcome == "written" else "observed"] += 1
    summary.reasons[spec.verdict.reason_code.value] += 1
    summary.routes.append(spec)
