"""Routes from a bucket's replication configuration (GetBucketReplication), as S3 applies it.

- Every rule and its one destination (V2 configurations: one Destination per rule; several rules
  give several destinations). Disabled rules are listed, never probed.
- A probe key is replicated by a rule whose filter matches it: a prefix filter (``Filter.Prefix``,
  ``Filter.And.Prefix`` or the V1 ``Prefix``) it starts with, and no tag condition (probes carry
  no tags). Where several enabled rules match for one destination, S3 uses the one with the
  highest ``Priority`` (R6): that rule's RTC settings and RuleId apply.
- The probe route's destinations are every destination an enabled matching rule names: S3 marks
  the source COMPLETED only when every one of them has its replica (R6).
- Cross-account destinations (``Destination.Account``) get the role replmon assumes to read
  them from ``roles`` (account id -> role ARN), when given.

>>> cfg = {"Role": "arn:aws:iam::111122223333:role/r", "Rules": [
...     {"ID": "all", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""},
...      "Destination": {"Bucket": "arn:aws:s3:::dr-a"}},
...     {"ID": "probes", "Priority": 2, "Status": "Enabled", "Filter": {"Prefix": "replmon-probes/"},
...      "Destination": {"Bucket": "arn:aws:s3:::dr-a"}}]}
>>> [(r.rule_id, r.covers_probes, r.chosen) for r in discover("src", cfg, "replmon-probes/").rules]
[('all', True, False), ('probes', True, True)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replmon.core.route import Destination, Endpoint, Route


@dataclass
class RuleRoute:
    rule_id: str
    priority: int | None
    status: str
    prefix: str | None  # None: the rule's filter has no prefix (every key)
    tags: dict[str, str]
    destination_bucket: str
    account: str | None
    storage_class: str | None
    rtc: bool
    metrics: bool
    covers_probes: bool = False
    chosen: bool = False  # the rule S3 applies to probe keys for this destination

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Discovery:
    source_bucket: str
    rules: list[RuleRoute] = field(default_factory=list)
    route: Route | None = None
    notes: list[str] = field(default_factory=list)


def _bucket(arn: str) -> str:
    return arn.rsplit(":", 1)[-1] if arn.startswith("arn:") else arn


def _filter(rule: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    if "Filter" not in rule:
        return rule.get("Prefix", ""), {}  # V1 rule
    f = rule["Filter"] or {}
    if "And" in f:
        return f["And"].get("Prefix"), {t["Key"]: t["Value"] for t in f["And"].get("Tags", [])}
    if "Tag" in f:
        return None, {f["Tag"]["Key"]: f["Tag"]["Value"]}
    return f.get("Prefix"), {}


def discover(source_bucket: str, config: Mapping[str, Any], probe_prefix: str, *, name: str | None = None,
             roles: Mapping[str, str] | None = None, source: Endpoint | None = None,
             regions: Mapping[str, str] | None = None) -> Discovery:
    out = Discovery(source_bucket)
    for rule in config.get("Rules", []):
        prefix, tags = _filter(rule)
        dest = rule.get("Destination", {})
        rtc = (dest.get("ReplicationTime") or {}).get("Status") == "Enabled"
        out.rules.append(RuleRoute(
            rule_id=rule.get("ID", ""), priority=rule.get("Priority"), status=rule.get("Status", "Disabled"),
            prefix=prefix, tags=tags, destination_bucket=_bucket(dest.get("Bucket", "")), account=dest.get("Account"),
            storage_class=dest.get("StorageClass"), rtc=rtc, metrics=(dest.get("Metrics") or {}).get("Status") == "Enabled",
            # Probe keys start with the probe prefix: a rule prefix that is a prefix of it matches them all.
            covers_probes=not tags and (prefix is None or probe_prefix.startswith(prefix)),
        ))
    by_dest: dict[str, list[RuleRoute]] = {}
    for r in out.rules:
        if r.status == "Enabled" and r.covers_probes:
            by_dest.setdefault(r.destination_bucket, []).append(r)
        elif r.status == "Enabled" and r.tags:
            out.notes.append(f"rule {r.rule_id!r} filters on tags {r.tags}: probes carry no tags, so it never replicates them")
    dests = []
    for bucket, rules in by_dest.items():
        best = max(rules, key=lambda r: r.priority or 0)
        best.chosen = True
        if best.metrics is False:
            out.notes.append(f"rule {best.rule_id!r}: replication metrics are off, so S3 sends no RTC metrics and no "
                             "OperationFailedReplication events for it")
        role = (roles or {}).get(best.account or "")
        dests.append(Destination(bucket=bucket, account=best.account, role_arn=role, rule_id=best.rule_id,
                                 region=(regions or {}).get(bucket)))
    if dests:
        out.route = Route(name=name or f"{source_bucket}"[:64], source=source or Endpoint(bucket=source_bucket),
                          destinations=dests, prefix=probe_prefix)
    else:
        out.notes.append(f"no enabled rule replicates {probe_prefix!r}: add one (probes would end FAILED, NoReplication)")
    return out
