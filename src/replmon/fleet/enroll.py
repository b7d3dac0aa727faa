"""Wiring a bucket's event notifications to replmon: merge replmon's entries into the bucket's
existing notification configuration, or take them out again, without touching anyone else's.

Pure: every function takes the configuration as S3's GetBucketNotificationConfiguration returns it
and gives the configuration to put back (adapters/member_buckets.py reads and writes it). The S3
rules it encodes (docs/ENROLL.md cites the pages):

- PutBucketNotificationConfiguration **replaces** the whole configuration, so a merge writes back
  every entry it read, unchanged, plus replmon's (a read-modify-write).
- Two entries whose **event types overlap** may not have **overlapping key filters** ("Overlapping
  prefixes and suffixes are not supported", FilterRule): prefixes overlap when one starts with the
  other (no prefix overlaps every prefix), suffixes when one ends with the other, and two filters
  overlap when both do. S3 refuses the whole put; so does this module, before it, with the fix.
- S3 notifies an SQS queue or SNS topic **in the bucket's own Region** only: a target in another
  Region is refused (buckets elsewhere notify their Region's member topic, templates/member-region.yaml).
- replmon's entries are the ones whose ``Id`` starts with ``replmon`` (fleet/offboard.py ``ours``).
  An existing one is matched by what it delivers (target, event types, filter), not by its Id, so
  an entry an older release named (``replmon-replicas``, ``replmon-replicas-2``) on the same target
  and prefix counts as in place. An unenroll removes those the routes that stay enrolled do not
  need (all of them for ``replmon uninstall --fleet``); ``EventBridgeConfiguration`` is kept as it was.
- replmon's own entries obey the overlap rule among themselves too: two destination prefixes that
  nest (``p/`` and ``p/x/``) for one target become one entry on the shorter prefix, which covers both.

The entries (what the stack consumes, template.yaml's demo buckets do the same):

- a route's **source**: ``replmon-events``, ``s3:Replication:*`` with no filter (every object's
  failed and missed-threshold events; S3 sends no replication events to EventBridge);
- each **destination**: ``replmon-replicas-<hash of the prefix>`` (:func:`replicas_id`: the
  same prefix always gets the same Id, whichever routes a run names), ``s3:ObjectCreated:*`` on the probe prefix (a
  replica's creation time narrows its probe's interval, docs/SEMANTICS.md "Replica events").
  The stack has no EventBridge rule that forwards a destination's "Object Created" events to its
  events queue, so turning EventBridge on alone would deliver nothing: the entry is merged.

>>> want = Wanted("orders", "us-east-1", "source", "replmon-events", "arn:aws:sqs:us-east-1:123456789012:q", ("s3:Replication:*",))
>>> plan = plan_enroll("orders", "us-east-1", {"EventBridgeConfiguration": {}}, [want])
>>> plan.action, plan.after
('add', {'EventBridgeConfiguration': {}, 'QueueConfigurations': [{'Id': 'replmon-events', 'QueueArn': 'arn:aws:sqs:us-east-1:123456789012:q', 'Events': ['s3:Replication:*']}]})
>>> plan_enroll("orders", "us-east-1", plan.after, [want]).action
'none'
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.fleet.offboard import TARGETS, notification_without, ours

#: The entry replmon needs on a source (docs/ENROLL.md), and on each destination.
EVENTS_ID = "replmon-events"
REPLICATION_EVENTS = "s3:Replication:*"
REPLICAS_ID = "replmon-replicas"
OBJECT_CREATED = "s3:ObjectCreated:*"
#: plan_unenroll's ``keep`` entries carry this target: an unenroll does not know the hub, and an
#: entry of replmon's with the same events and filter is the one a remaining route uses.
ANY_TARGET = "*"
#: What a bucket plan does: add (or update) replmon's entries, remove them, nothing, or refuse.
ADD, REMOVE, NONE, REFUSED = "add", "remove", "none", "refused"


@dataclass(frozen=True)
class Wanted:
    """One entry replmon needs on a bucket: its ``Id``, target, event types and key prefix."""

    bucket: str
    region: str
    side: str  # source | destination
    entry_id: str
    target_arn: str
    events: tuple[str, ...]
    prefix: str = ""
    routes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return target_key(self.target_arn)

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Id": self.entry_id, TARGETS[self.key]: self.target_arn, "Events": list(self.events)}
        if self.prefix:
            out["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": self.prefix}]}}
        return out


@dataclass
class BucketPlan:
    """What happens to one bucket's notification configuration."""

    bucket: str
    region: str | None
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    entries: list[str] = field(default_factory=list)  # replmon's entries added, updated or removed, one line each
    reason: str = ""
    fix: str = ""
    sides: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()

    @property
    def changes(self) -> bool:
        return self.action in (ADD, REMOVE)

    def diff(self) -> list[str]:
        """The exact change, as a unified diff of the configuration's JSON (before -> after)."""
        if not self.changes:
            return []
        a = json.dumps(self.before, indent=1, sort_keys=True).splitlines()
        b = json.dumps(self.after, indent=1, sort_keys=True).splitlines()
        return list(difflib.unified_diff(a, b, f"{self.bucket} (now)", f"{self.bucket} (after)", lineterm="", n=2))

    def to_json(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "region": self.region, "side": "+".join(self.sides) or None, "routes": list(self.routes),
                "action": self.action, "entries": self.entries, "reason": self.reason or None, "fix": self.fix or None,
                "diff": self.diff(), "before": self.before, "after": self.after}


def replicas_id(prefix: str) -> str:
    """A destination entry's Id, from its prefix alone (stable across runs and route subsets).

    >>> replicas_id("replmon-probes/") == replicas_id("replmon-probes/"), replicas_id("a/") != replicas_id("b/")
    (True, True)
    """
    return f"{REPLICAS_ID}-{hashlib.sha256(prefix.encode()).hexdigest()[:10]}"


def configuration(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """S3's answer without what is not configuration (ResponseMetadata)."""
    return {k: v for k, v in (raw or {}).items() if k != "ResponseMetadata"}


def target_key(arn: str) -> str:
    """The configuration list an entry for ``arn`` lives in."""
    return "TopicConfigurations" if ":sns:" in arn else "LambdaFunctionConfigurations" if ":lambda:" in arn else "QueueConfigurations"


def arn_region(arn: str) -> str | None:
    """The Region field of an ARN (empty for MinIO's ``arn:minio:sqs::ID:webhook``: None)."""
    parts = arn.split(":")
    return parts[3] or None if len(parts) > 4 else None


def _rules(entry: Mapping[str, Any]) -> dict[str, str]:
    rules = ((entry.get("Filter") or {}).get("Key") or {}).get("FilterRules") or []
    return {str(r.get("Name", "")).lower(): str(r.get("Value", "")) for r in rules}


def _events_overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    """Two event lists share an event type (``s3:ObjectCreated:*`` covers ``s3:ObjectCreated:Put``)."""
    return any(fnmatch.fnmatchcase(x, y) or fnmatch.fnmatchcase(y, x) for x in a for y in b)


def filters_overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """S3's rule: the prefixes overlap (one starts with the other; none overlaps all) and the
    suffixes overlap (one ends with the other; none overlaps all).

    >>> f = lambda p="", s="": {"Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": p}, {"Name": "Suffix", "Value": s}]}}}
    >>> filters_overlap(f("images/"), f("images/thumbs/")), filters_overlap(f("images/"), f("logs/"))
    (True, False)
    >>> filters_overlap(f("", ".jpg"), f("", ".png")), filters_overlap({}, f("a/", ".jpg"))
    (False, True)
    """
    ra, rb = _rules(a), _rules(b)
    pa, pb, sa, sb = ra.get("prefix", ""), rb.get("prefix", ""), ra.get("suffix", ""), rb.get("suffix", "")
    return (pa.startswith(pb) or pb.startswith(pa)) and (sa.endswith(sb) or sb.endswith(sa))


def conflicts(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """S3 refuses a configuration holding both entries."""
    return _events_overlap(a.get("Events", []), b.get("Events", [])) and filters_overlap(a, b)


def _normal(entry: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    """An entry as S3 compares it: target, event set, filter rules by lower-cased name."""
    return entry.get(TARGETS[key]), tuple(sorted(entry.get("Events", []))), tuple(sorted(_rules(entry).items()))


def _describe(key: str, entry: Mapping[str, Any]) -> str:
    rules = _rules(entry)
    where = "".join(f", {n} {v!r}" for n, v in sorted(rules.items()) if v)
    return f"{key[:-len('Configurations')]} {entry.get('Id', '(no id)')}: {','.join(entry.get('Events', []))}{where} -> {entry.get(TARGETS[key])}"


def _covers(entry: Mapping[str, Any], w: Wanted, key: str) -> bool:
    """An entry already delivers what ``w`` would: same target (any, for :data:`ANY_TARGET`), its
    events cover ``w``'s, and its filter matches every key ``w``'s does (no suffix; a prefix that
    ``w``'s starts with)."""
    rules = _rules(entry)
    return ((w.target_arn == ANY_TARGET or entry.get(TARGETS[key]) == w.target_arn)
            and all(any(fnmatch.fnmatchcase(e, x) for x in entry.get("Events", [])) for e in w.events)
            and not rules.get("suffix") and w.prefix.startswith(rules.get("prefix", "")))


def _supersedes(w: Wanted, entry: Mapping[str, Any], key: str) -> bool:
    """``w``'s entry delivers everything ``entry`` (one of replmon's) does: same target, ``w``'s
    events cover its events, and its prefix starts with ``w``'s (``w`` has no suffix)."""
    return (key == w.key and entry.get(TARGETS[key]) == w.target_arn
            and all(any(fnmatch.fnmatchcase(x, e) for e in w.events) for x in entry.get("Events", []))
            and _rules(entry).get("prefix", "").startswith(w.prefix))


def _what(w: Wanted) -> str:
    return ",".join(w.events) + (f" on prefix {w.prefix!r}" if w.prefix else " on every key")


def plan_enroll(bucket: str, region: str | None, current: Mapping[str, Any] | None, wanted: Sequence[Wanted]) -> BucketPlan:
    """The merged configuration for ``bucket``: every entry it has, plus (or with updated) replmon's
    ``wanted`` ones; REFUSED with the reason and the fix where S3 would reject the result.

    An entry of replmon's already there is matched by target, events and filter (any ``replmon`` Id:
    an older release's ``replmon-replicas`` on the same prefix is in place); one on the same events
    and filter with another target, or with ``w``'s Id, is updated; one ``w`` covers (a longer
    prefix, same target) is replaced by ``w``'s."""
    before = configuration(current)
    after: dict[str, Any] = json.loads(json.dumps(before))
    sides = tuple(dict.fromkeys(w.side for w in wanted))
    routes = tuple(dict.fromkeys(r for w in wanted for r in w.routes))
    lines: list[str] = []
    refusals: list[tuple[str, str]] = []
    # replmon's own entries obey S3's overlap rule among themselves (wanted_for already folds nested
    # prefixes of one target into the shorter one; what is left would be refused by S3)
    for i, a in enumerate(wanted):
        for b in wanted[i + 1:]:
            if conflicts(a.entry(), b.entry()):
                refusals.append((f"replmon's {a.entry_id} ({_what(a)} -> {a.target_arn}, routes {', '.join(a.routes) or '?'}) and "
                                 f"{b.entry_id} ({_what(b)} -> {b.target_arn}, routes {', '.join(b.routes) or '?'}) overlap: S3 "
                                 "refuses overlapping prefix/suffix filters for one event type",
                                 "give these routes probe prefixes that do not nest (registry field prefix; replmon fleet put), "
                                 "or one events target for the bucket (replmon then keeps one entry on the shorter prefix)"))
    for w in wanted if not refusals else ():
        key = w.key
        target_region = arn_region(w.target_arn)
        if region and target_region and target_region != region:
            refusals.append((f"{w.entry_id}: {w.target_arn} is in {target_region}, the bucket in {region}: S3 notifies only an SQS "
                             "queue or SNS topic in the bucket's own Region",
                             f"deploy templates/member-region.yaml in {region} (this bucket's account) and point the entry at its "
                             "EventsTopicArn (replmon fleet enroll does when --events-target is not given)"))
            continue
        entry = w.entry()
        replmon = [(k, e) for k in TARGETS for e in after.get(k, []) if ours(e.get("Id"))]
        if any(k == key and _normal(e, k) == _normal(entry, key) for k, e in replmon):
            continue  # in place, whatever Id it has
        mine = (next(((k, e) for k, e in replmon if e.get("Id") == w.entry_id), None)
                or next(((k, e) for k, e in replmon if _normal(e, k)[1:] == _normal(entry, key)[1:]), None))
        superseded = [(k, e) for k, e in replmon if (mine is None or e is not mine[1]) and _supersedes(w, e, k)]
        others = [(k, e) for k in TARGETS for e in after.get(k, [])
                  if (mine is None or e is not mine[1]) and all(e is not s for _, s in superseded)]
        wired = [e for k, e in others if k == key and _covers(e, w, key)]
        if wired:
            whose = "replmon's" if ours(wired[0].get("Id")) else "your"
            lines.append(f"{w.entry_id}: delivered already by {whose} entry {wired[0].get('Id', '(no id)')} (kept; nothing added)")
            continue
        clash = [_describe(k, e) for k, e in others if conflicts(e, entry)]
        if clash:
            fix = ("fan out instead: point that entry at an SNS topic that both its consumer and replmon's target subscribe to, or "
                   "at replmon's target itself (replmon's entry has no filter, so narrowing that entry does not help)"
                   if not w.prefix else
                   f"narrow that entry so it no longer covers the probe prefix {w.prefix!r} (a prefix outside it), or fan out "
                   "through an SNS topic; optional: without this entry probes are still measured by polling")
            refusals.append((f"{w.entry_id} ({_what(w)}) overlaps {'; '.join(clash)}: S3 refuses overlapping prefix/suffix filters "
                             "for one event type", fix))
            continue
        for k, e in superseded:
            after[k] = [x for x in after[k] if x is not e]
            lines.append(f"remove {_describe(k, e)} (covered by {w.entry_id}, prefix {w.prefix!r})")
        if mine is not None and mine[0] == key:
            after[key] = [entry if x is mine[1] else x for x in after[key]]
            lines.append(f"update {_describe(key, mine[1])} -> {_describe(key, entry)}")
            continue
        if mine is not None:
            after[mine[0]] = [x for x in after[mine[0]] if x is not mine[1]]
            lines.append(f"update {_describe(mine[0], mine[1])} -> {_describe(key, entry)}")
        else:
            lines.append(f"add {_describe(key, entry)}")
        after.setdefault(key, []).append(entry)
    if refusals:
        return BucketPlan(bucket, region, REFUSED, before, before, lines, "; ".join(r for r, _ in refusals),
                          "; ".join(dict.fromkeys(f for _, f in refusals)), sides, routes)
    after = {k: v for k, v in after.items() if k not in TARGETS or v or not before.get(k)}  # a list emptied here: gone, as S3 answers
    changed = after != before
    return BucketPlan(bucket, region, ADD if changed else NONE, before, after, lines or ["replmon's entries are in place"], "", "",
                      sides, routes)


def plan_unenroll(bucket: str, region: str | None, current: Mapping[str, Any] | None, sides: tuple[str, ...] = (),
                  routes: tuple[str, ...] = (), keep: Sequence[Wanted] = ()) -> BucketPlan:
    """``bucket``'s configuration without replmon's entries (Id prefix ``replmon``) except those
    that deliver what ``keep`` needs (the entries of the routes that stay enrolled, wanted_for with
    :data:`ANY_TARGET`), the rest as it was. No ``keep`` (``replmon uninstall --fleet``): all go."""
    before = configuration(current)
    if not keep:
        after, gone = notification_without(before)
        kept: list[str] = []
    else:
        after, gone, kept = {}, [], []
        for key, value in before.items():
            if key not in TARGETS:
                after[key] = value
                continue
            stay = []
            for e in value:
                needs = [w for w in keep if _covers(e, w, key)] if ours(e.get("Id")) else []
                if ours(e.get("Id")) and not needs:
                    gone.append(f"{key} {e.get('Id', '(no id)')} -> {e.get(TARGETS[key])}")
                    continue
                if needs:
                    kept.append(f"keep {e.get('Id')}: route {', '.join(r for w in needs for r in w.routes)} still needs it")
                stay.append(e)
            if stay:
                after[key] = stay
    return BucketPlan(bucket, region, REMOVE if gone else NONE, before, after,
                      [f"remove {g}" for g in gone] + kept or ["none of replmon's"], sides=sides, routes=routes)


def kept_intact(before: Mapping[str, Any], written: Mapping[str, Any]) -> list[str]:
    """Entries of ``before`` that are not replmon's and are missing or changed in ``written`` (what
    S3 answered after the put): empty when nothing of the user's was dropped or changed."""
    lost = []
    for key in TARGETS:
        now = {e.get("Id"): _normal(e, key) for e in written.get(key, [])}
        for e in before.get(key, []):
            if not ours(e.get("Id")) and now.get(e.get("Id")) != _normal(e, key):
                lost.append(_describe(key, e))
    if "EventBridgeConfiguration" in before and "EventBridgeConfiguration" not in written:
        lost.append("EventBridgeConfiguration")
    return lost


@dataclass(frozen=True)
class Hub:
    """Where replmon's events go: the hub's events queue (its account and Region's buckets) and the
    member-Region topics' name (every other account and Region, templates/member-region.yaml)."""

    queue_arn: str
    topic_name: str
    partition: str = "aws"

    @property
    def account(self) -> str:
        return self.queue_arn.split(":")[4]

    @property
    def region(self) -> str:
        return self.queue_arn.split(":")[3]

    def target(self, account: str, region: str) -> str:
        if (account, region) == (self.account, self.region):
            return self.queue_arn
        return f"arn:{self.partition}:sns:{region}:{account}:{self.topic_name}"


def wanted_for(specs: Iterable[Any], hub: Hub | None, override: str | None = None) -> dict[tuple[str, str], list[Wanted]]:
    """(bucket, region) -> replmon's entries on it, for every route of ``specs`` (RouteSpec, any mode
    but off): ``replmon-events`` on each source, ``replmon-replicas-<hash>`` (its probe prefix,
    :func:`replicas_id`) on each destination, nested prefixes folded into the shorter one.
    ``override``: one target for every bucket (the lab's MinIO webhook; :data:`ANY_TARGET` for an
    unenroll's ``keep``)."""
    from replmon.core.registry import Mode

    acc: dict[tuple[str, str, str], Wanted] = {}
    for spec in specs:
        if spec.verdict.mode is Mode.OFF:
            continue
        s = spec.source
        sides = [(s.account, s.region, s.bucket, "source", EVENTS_ID, (REPLICATION_EVENTS,), "")]
        sides += [(d.account, d.region, d.bucket, "destination", REPLICAS_ID, (OBJECT_CREATED,), spec.prefix) for d in spec.destinations]
        for account, region, bucket, side, entry_id, events, prefix in sides:
            target = override or (hub.target(account, region) if hub else "")
            if not target:
                raise ValueError("no events target: give the stack (its EventsQueueArn) or --events-target")
            old = acc.get((bucket, side, prefix))
            acc[(bucket, side, prefix)] = Wanted(bucket, region, side, entry_id, target, events, prefix,
                                                 (*(old.routes if old else ()), spec.name))
    # one replicas entry per probe prefix, named by the prefix; nested prefixes of one target and
    # event type (p/ and p/x/) would overlap (S3 refuses the put): the shorter one covers both
    for bucket in {b for b, side, _ in acc if side == "destination"}:
        keys = sorted((k for k in acc if k[0] == bucket and k[1] == "destination"), key=lambda k: (len(k[2]), k[2]))
        for k in keys:
            acc[k] = dataclasses.replace(acc[k], entry_id=replicas_id(k[2]))
        for i, k in enumerate(keys):
            w = acc[k]
            outer = next((acc[o] for o in keys[:i] if o in acc and k[2].startswith(o[2]) and acc[o].target_arn == w.target_arn
                          and acc[o].events == w.events), None)
            if outer is not None:
                acc[(bucket, "destination", outer.prefix)] = dataclasses.replace(outer, routes=(*outer.routes, *w.routes))
                del acc[k]
    out: dict[tuple[str, str], list[Wanted]] = {}
    for w in acc.values():
        out.setdefault((w.bucket, w.region), []).append(w)
    return out


def subscriptions(wanted: Mapping[tuple[str, str], Sequence[Wanted]], hub: Hub) -> list[str]:
    """The member-Region topics in other accounts the hub's queue must subscribe to (the hub's own
    account's topics are subscribed by templates/member-region.yaml: HubIsThisAccount)."""
    topics = {w.target_arn for ws in wanted.values() for w in ws if ":sns:" in w.target_arn}
    return sorted(t for t in topics if t.split(":")[4] != hub.account)
