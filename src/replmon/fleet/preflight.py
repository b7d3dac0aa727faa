"""Is an existing route ready to be probed? Read-only checks on what S3, IAM and KMS return, each
with a verdict and, where it fails, the fix (often the exact document to apply).

The caller (cli/preflight.py) reads the configurations; this module only judges them, so every
check runs on plain dictionaries as S3's API returns them. The facts each check encodes:

- Both buckets need versioning for replication ("Use PutBucketReplication": "The destination
  bucket must have versioning enabled"; failure reason ``DstBucketUnversioned``).
- A rule covers a probe key when its prefix filter matches and it has no tag condition
  (fleet/discovery.py; S3's replication configuration reference).
- The replication role must trust ``s3.amazonaws.com`` and needs ``s3:GetReplicationConfiguration``
  and ``s3:ListBucket`` on the source bucket, ``s3:GetObjectVersionForReplication`` and
  ``s3:GetObjectVersionAcl`` on its objects and ``s3:ReplicateObject`` on the destination's
  ("Setting up permissions for live replication"). ``s3:GetObjectVersionTagging``,
  ``s3:ReplicateTags`` and ``s3:ReplicateDelete`` are optional: without them S3 still replicates the
  objects, but not their tags ("it replicates the objects, but not the object tags";
  ``s3:ReplicateObject`` already allows tags, and the page shows a destination owner denying
  ``s3:ReplicateTags``), or not delete markers. Probes carry no tags and replmon's rule turns
  delete-marker replication off, so missing ones are a warning, not a failure.
- SSE-KMS objects replicate only with ``SourceSelectionCriteria.SseKmsEncryptedObjects`` enabled
  and a ``ReplicaKmsKeyID`` ("Replicating objects created with server-side encryption").
- Notification filters of one event type may not overlap ("FilterRule": "Overlapping prefixes and
  suffixes are not supported"), and PutBucketNotificationConfiguration replaces the whole
  configuration, so the fix is the merged document.

>>> [c.verdict for c in (versioning("source", "src", {"Status": "Enabled"}), versioning("source", "src", {}))]
['pass', 'fail']
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.fleet.discovery import Discovery, RuleRoute
from replmon.fleet.enroll import EVENTS_ID, REPLICATION_EVENTS, Wanted, plan_enroll  # the merge `replmon fleet enroll` applies
from replmon.fleet.offboard import TARGETS, ours

PASS, WARN, FAIL, UNKNOWN = "pass", "warn", "fail", "unknown"
#: The check does not apply to this route (e.g. IAM on an S3-compatible server, which has none):
#: said with the reason, never a pass, never counted against readiness or the exit code.
NOT_APPLICABLE = "not_applicable"
#: The role S3 assumes needs these, per resource (Setting up permissions for live replication).
SOURCE_BUCKET_ACTIONS = ("s3:GetReplicationConfiguration", "s3:ListBucket")
SOURCE_OBJECT_ACTIONS = ("s3:GetObjectVersionForReplication", "s3:GetObjectVersionAcl")
DEST_OBJECT_ACTIONS = ("s3:ReplicateObject",)
#: Optional ones, and what replication loses without them (the same page): a warning, not a failure.
OPTIONAL_SOURCE_OBJECT_ACTIONS = {"s3:GetObjectVersionTagging": "object tags are not replicated (the objects are)"}
OPTIONAL_DEST_OBJECT_ACTIONS = {"s3:ReplicateTags": "object tags are not replicated (the objects are)",
                                "s3:ReplicateDelete": "delete markers are not replicated (only matters for rules with "
                                                      "DeleteMarkerReplication Enabled)"}


@dataclass
class Check:
    """One precondition: ``verdict`` is pass, warn (works, with less), fail, unknown (could not read)
    or not_applicable (no such thing on this route; ``detail`` says why)."""

    name: str
    verdict: str
    detail: str
    fix: str = ""
    document: Any = None  # the exact document the fix applies, when there is one

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"check": self.name, "verdict": self.verdict, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        if self.document is not None:
            out["document"] = self.document
        return out


@dataclass
class Preflight:
    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(c.verdict in (PASS, WARN, NOT_APPLICABLE) for c in self.checks)

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.checks)


def versioning(side: str, bucket: str, answer: Mapping[str, Any] | None, error: str | None = None) -> Check:
    """GetBucketVersioning: ``Status`` is absent on a bucket that never had versioning."""
    name = f"{side} versioning"
    if error:
        return Check(name, UNKNOWN, f"{bucket}: GetBucketVersioning: {error}", "grant s3:GetBucketVersioning to the caller, or check by hand")
    status = (answer or {}).get("Status")
    if status == "Enabled":
        return Check(name, PASS, f"{bucket}: Enabled")
    return Check(name, FAIL, f"{bucket}: {status or 'never enabled'}: S3 replicates only between versioned buckets",
                 f"aws s3api put-bucket-versioning --bucket {bucket} --versioning-configuration Status=Enabled")


def probe_rule(dest_bucket: str, prefix: str, priority: int, rule_id: str = "replmon-probes") -> dict[str, Any]:
    """A rule that replicates the probe prefix to ``dest_bucket``, with RTC and metrics on."""
    return {"ID": rule_id, "Priority": priority, "Status": "Enabled", "Filter": {"Prefix": prefix},
            "DeleteMarkerReplication": {"Status": "Disabled"},
            "Destination": {"Bucket": f"arn:aws:s3:::{dest_bucket}", "ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}},
                            "Metrics": {"Status": "Enabled", "EventThreshold": {"Minutes": 15}}}}


#: Why an S3-compatible server's rule lacks RTC and metrics (said instead of AWS's fix).
NOT_ON_S3_COMPATIBLE = "an S3-compatible server (S3 features; MinIO's `mc replicate add` sets neither field)"


def replication(bucket: str, config: Mapping[str, Any] | None, found: Discovery | None, dest_bucket: str | Sequence[str] | None,
                prefix: str, s3_compatible: bool = False) -> list[Check]:
    """The configuration exists, an enabled rule covers the probe prefix (for each of
    ``dest_bucket``, one name or several), and the chosen rules have RTC and replication metrics
    (``s3_compatible``: a server other than AWS, whose rules cannot have them: said so)."""
    wanted = [dest_bucket] if isinstance(dest_bucket, str) else list(dest_bucket or [])
    if config is None or found is None:
        rules = [probe_rule(d, prefix, i + 1, _rule_id(i)) for i, d in enumerate(wanted or ["DESTINATION-BUCKET"])]
        doc = {"Role": "arn:aws:iam::ACCOUNT:role/REPLICATION-ROLE", "Rules": rules}
        return [Check("replication configuration", FAIL, f"{bucket}: no replication configuration (ReplicationConfigurationNotFoundError)",
                      f"aws s3api put-bucket-replication --bucket {bucket} --replication-configuration file://replication.json "
                      "(the role: see 'replication role')", doc)]
    n = len(config.get("Rules", []))
    checks = [Check("replication configuration", PASS, f"{bucket}: {n} rule{'' if n == 1 else 's'}, role {config.get('Role') or '(none)'}")]
    chosen = [r for r in found.rules if r.chosen and (not wanted or r.destination_bucket in wanted)]
    uncovered = [d for d in wanted if not any(r.destination_bucket == d for r in chosen)] or ([] if chosen else ["DESTINATION-BUCKET"])
    if uncovered:
        top = max([r.priority or 0 for r in found.rules] or [0]) + 1
        taken = {r.get("ID") for r in config.get("Rules", [])}
        ids = [i for i in (_rule_id(n) for n in range(len(taken) + len(uncovered) + 1)) if i not in taken][:len(uncovered)]
        merged = {k: v for k, v in config.items() if k != "ResponseMetadata"}
        merged["Rules"] = [*config.get("Rules", []), *(probe_rule(d, prefix, top + i, ids[i]) for i, d in enumerate(uncovered))]
        why = (f"no enabled rule replicates {prefix!r} to {', '.join(uncovered)}" if chosen else
               "; ".join(found.notes) or f"no enabled rule replicates {prefix!r} to {', '.join(uncovered)}")
        checks.append(Check("rule covers the probe prefix", FAIL, why,
                            f"add a rule for {prefix!r} (the whole configuration, since PutBucketReplication replaces it)", merged))
        return checks
    checks.append(Check("rule covers the probe prefix", PASS,
                        "; ".join(f"rule {r.rule_id!r} (priority {r.priority}) -> {r.destination_bucket}" for r in chosen)))
    checks += [_rtc(r, s3_compatible) for r in chosen]
    checks += [_metrics(r, s3_compatible) for r in chosen]
    return checks


def _rule_id(n: int) -> str:
    return "replmon-probes" if n == 0 else f"replmon-probes-{n + 1}"


def _rtc(r: RuleRoute, s3_compatible: bool = False) -> Check:
    if r.rtc:
        return Check("RTC on the rule", PASS, f"rule {r.rule_id!r}: ReplicationTime Enabled (15-minute SLA, threshold events)")
    if s3_compatible:
        return Check("RTC on the rule", WARN, f"rule {r.rule_id!r}: no ReplicationTime on {NOT_ON_S3_COMPATIBLE}: no "
                     "OperationMissedThreshold events; probes and RPO still work", "none on this server (on AWS: add ReplicationTime)")
    return Check("RTC on the rule", WARN, f"rule {r.rule_id!r}: no Replication Time Control: no s3:Replication:OperationMissedThreshold "
                 "events, no 15-minute SLA; probes and RPO still work",
                 "optional: add Destination.ReplicationTime {Status: Enabled, Time: {Minutes: 15}} and Metrics (RTC fee per GB)")


def _metrics(r: RuleRoute, s3_compatible: bool = False) -> Check:
    if r.metrics:
        return Check("replication metrics on the rule", PASS, f"rule {r.rule_id!r}: Metrics Enabled")
    if s3_compatible:
        return Check("replication metrics on the rule", WARN, f"rule {r.rule_id!r}: no Metrics on {NOT_ON_S3_COMPATIBLE}: no "
                     "ReplicationLatency / pending metrics (RPO from probes and events)",
                     "none on this server (on AWS: add Destination.Metrics)")
    return Check("replication metrics on the rule", WARN, f"rule {r.rule_id!r}: metrics off: S3 publishes no ReplicationLatency / "
                 "pending metrics and sends no OperationFailedReplication events for it (RPO from probes only)",
                 "add Destination.Metrics {Status: Enabled, EventThreshold: {Minutes: 15}} to the rule")


def _events(entry: Mapping[str, Any]) -> set[str]:
    return set(entry.get("Events", []))


def _prefix(entry: Mapping[str, Any]) -> str:
    rules = ((entry.get("Filter") or {}).get("Key") or {}).get("FilterRules", [])
    return next((r["Value"] for r in rules if str(r.get("Name", "")).lower() == "prefix"), "")


def _same_type(a: Iterable[str], b: Iterable[str]) -> bool:
    """Two event-type lists name a common event (``s3:Replication:*`` covers each s3:Replication: type)."""
    return any(fnmatch.fnmatchcase(x, y) or fnmatch.fnmatchcase(y, x) for x in a for y in b)


def _target_key(arn: str) -> tuple[str, str]:
    """Where an entry for ``arn`` lives in a notification configuration, and its ARN field."""
    key = "TopicConfigurations" if ":sns:" in arn else "LambdaFunctionConfigurations" if ":lambda:" in arn else "QueueConfigurations"
    return key, TARGETS[key]


def notifications(bucket: str, config: Mapping[str, Any] | None, target_arn: str | None, error: str | None = None,
                  probe_prefix: str | None = None) -> Check:
    """The source sends ``s3:Replication:*`` to replmon's events target (the stack's queue), or can
    without a conflict; a failing check prints the merged configuration to apply (S3 replaces the
    whole of it). An entry to the target filtered on a prefix that covers ``probe_prefix`` (the
    lab's) works for the probes only: a warning."""
    name = "replication events"
    if error:
        return Check(name, UNKNOWN, f"{bucket}: GetBucketNotificationConfiguration: {error}", "grant s3:GetBucketNotification to the caller")
    cfg = {k: v for k, v in (config or {}).items() if k != "ResponseMetadata"}
    mine: list[Mapping[str, Any]] = []
    if target_arn:
        key, field_ = _target_key(target_arn)
        mine = [e for e in cfg.get(key, []) if e.get(field_) == target_arn and _same_type(e.get("Events", []), [REPLICATION_EVENTS])]
        if any(_prefix(e) == "" for e in mine):
            return Check(name, PASS, f"{bucket}: s3:Replication:* -> {target_arn}")
        covering = [e for e in mine if probe_prefix is not None and probe_prefix.startswith(_prefix(e))]
        if covering:
            return Check(name, WARN, f"{bucket}: {', '.join(sorted(_events(covering[0])))} -> {target_arn} for prefix "
                         f"{_prefix(covering[0])!r} only: the probes' replication events arrive, the route's other objects' do not",
                         "for passive signals on every object, drop the entry's prefix filter (replmon's own entry has none)")
    clash = [f"{key} {e.get('Id', '(no id)')} ({', '.join(sorted(_events(e)))}, prefix {_prefix(e)!r})"
             for key in TARGETS
             # replmon's entry filters nothing, so every other entry of a replication event type overlaps it
             for e in cfg.get(key, []) if not ours(e.get("Id")) and e not in mine and _same_type(_events(e), [REPLICATION_EVENTS])]
    if clash:
        return Check(name, FAIL, f"{bucket}: already sends replication events elsewhere: {'; '.join(clash)}; S3 refuses overlapping "
                     "filters for one event type", "fan out instead: point that entry at one SNS topic that both its "
                     "consumer and replmon's queue subscribe to, or point that entry at replmon's queue (replmon's entry has "
                     "no filter, and a filterless entry overlaps every prefix, so narrowing the other entry does not help)")
    if not target_arn:
        return Check(name, WARN, f"{bucket}: no conflicting entry; give --events-target (the stack's output EventsQueueArn) to "
                     "check replmon's own entry", "rerun with --events-target")
    plan = plan_enroll(bucket, None, cfg, [Wanted(bucket, "", "source", EVENTS_ID, target_arn, (REPLICATION_EVENTS,))])
    if plan.action == "refused":  # e.g. an entry of yours to the target on a prefix: it overlaps replmon's
        return Check(name, FAIL, f"{bucket}: {plan.reason}", plan.fix)
    merged = plan.after
    return Check(name, FAIL, f"{bucket}: no s3:Replication:* entry for {target_arn}: no failure or missed-threshold events reach replmon",
                 f"replmon fleet enroll --apply (this merge, for every registry route), or aws s3api put-bucket-notification-configuration "
                 f"--bucket {bucket} --notification-configuration file://notification.json (every existing entry kept)", merged)


def encryption(bucket: str, answer: Mapping[str, Any] | None, config: Mapping[str, Any] | None, chosen: Sequence[RuleRoute],
               error: str | None = None) -> Check:
    """SSE-KMS by default on the source: the chosen rules must select SSE-KMS objects and name a
    replica key, else S3 does not replicate the probes (they end FAILED)."""
    name = "encryption"
    if error:
        return Check(name, UNKNOWN, f"{bucket}: GetBucketEncryption: {error}", "grant s3:GetEncryptionConfiguration to the caller")
    rules = ((answer or {}).get("ServerSideEncryptionConfiguration") or {}).get("Rules", [])
    default = (rules[0].get("ApplyServerSideEncryptionByDefault") or {}) if rules else {}
    algo = default.get("SSEAlgorithm", "AES256")
    if not rules:
        return Check(name, PASS, f"{bucket}: no default encryption configuration (on AWS, S3 encrypts new objects with SSE-S3; "
                     "no KMS key involved)")
    if not algo.startswith("aws:kms"):
        return Check(name, PASS, f"{bucket}: {algo} by default (no KMS key involved)")
    key = default.get("KMSMasterKeyID", "aws/s3")
    by_id = {r.get("ID", ""): r for r in (config or {}).get("Rules", [])}
    missing = []
    for c in chosen:
        rule = by_id.get(c.rule_id, {})
        sse = ((rule.get("SourceSelectionCriteria") or {}).get("SseKmsEncryptedObjects") or {}).get("Status")
        replica_key = ((rule.get("Destination") or {}).get("EncryptionConfiguration") or {}).get("ReplicaKmsKeyID")
        if sse != "Enabled" or not replica_key:
            missing.append(c.rule_id)
    if missing:
        return Check(name, FAIL, f"{bucket}: SSE-KMS by default ({key}), but rules {missing} do not replicate SSE-KMS objects: "
                     "the probes would end FAILED",
                     "on each rule: SourceSelectionCriteria.SseKmsEncryptedObjects.Status=Enabled and "
                     "Destination.EncryptionConfiguration.ReplicaKmsKeyID=<a key in the destination's Region>; the role needs "
                     "kms:Decrypt on the source key and kms:Encrypt on the replica key; give SourceKmsKeyArn/DestinationKmsKeyArn")
    return Check(name, PASS, f"{bucket}: SSE-KMS ({key}); the rules replicate SSE-KMS objects with their replica key "
                 "(key policies not evaluated: give the roles kms:Decrypt / kms:Encrypt there if they do not delegate to IAM)")


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _allows(statements: Iterable[Mapping[str, Any]], action: str, resource: str) -> bool:
    """Identity-policy statements allow ``action`` on ``resource``: an Allow matches and no Deny
    does. Conditions are not evaluated (the check says so)."""
    def match(s: Mapping[str, Any]) -> bool:
        acts = s.get("Action") or []
        res = s.get("Resource") or []
        return (any(fnmatch.fnmatchcase(action.lower(), str(a).lower()) for a in _as_list(acts))
                and any(fnmatch.fnmatchcase(resource, str(r)) for r in _as_list(res)))
    return (any(s.get("Effect") == "Allow" and match(s) for s in statements)
            and not any(s.get("Effect") == "Deny" and match(s) for s in statements))


def role_policy(bucket: str, dest_buckets: Sequence[str], prefix: str) -> dict[str, Any]:
    """The least-privilege identity policy the replication role needs for the probe prefix."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": list(SOURCE_BUCKET_ACTIONS), "Resource": f"arn:aws:s3:::{bucket}"},
        {"Effect": "Allow", "Action": [*SOURCE_OBJECT_ACTIONS, *OPTIONAL_SOURCE_OBJECT_ACTIONS], "Resource": f"arn:aws:s3:::{bucket}/{prefix}*"},
        {"Effect": "Allow", "Action": [*DEST_OBJECT_ACTIONS, *OPTIONAL_DEST_OBJECT_ACTIONS],
         "Resource": [f"arn:aws:s3:::{d}/{prefix}*" for d in dest_buckets]}]}


TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def replication_role(role_arn: str, trust: Mapping[str, Any] | None, policies: Sequence[Mapping[str, Any]] | None, bucket: str,
                     dest_buckets: Sequence[str], prefix: str, error: str | None = None) -> list[Check]:
    """S3 may assume the role, and the role's identity policies allow what replication of a probe
    key needs (Allow/Deny by action and resource; conditions, boundaries, SCPs and the destination's
    bucket policy are not evaluated here)."""
    if error or trust is None:
        return [Check("replication role", UNKNOWN, f"{role_arn}: {error or 'not read'}",
                      "read it yourself (iam get-role), or run preflight with iam:GetRole, iam:ListRolePolicies, iam:GetRolePolicy, "
                      "iam:ListAttachedRolePolicies, iam:GetPolicy, iam:GetPolicyVersion")]
    trusted = any(s.get("Effect") == "Allow" and "s3.amazonaws.com" in _as_list((s.get("Principal") or {}).get("Service", []))
                  and any(fnmatch.fnmatchcase("sts:assumerole", str(a).lower()) for a in _as_list(s.get("Action", [])))
                  for s in trust.get("Statement", []))
    checks = [Check("replication role trusts S3", PASS, f"{role_arn}: s3.amazonaws.com may assume it") if trusted else
              Check("replication role trusts S3", FAIL, f"{role_arn}: S3 may not assume it (failure reason AssumeRoleNotPermitted)",
                    f"aws iam update-assume-role-policy --role-name {role_arn.rsplit('/', 1)[-1]} --policy-document file://trust.json", TRUST)]
    statements = [s for p in policies or [] for s in _as_list(p.get("Statement", []))]
    key = f"{prefix}replmon-preflight"
    needed = ([(a, f"arn:aws:s3:::{bucket}") for a in SOURCE_BUCKET_ACTIONS]
              + [(a, f"arn:aws:s3:::{bucket}/{key}") for a in SOURCE_OBJECT_ACTIONS]
              + [(a, f"arn:aws:s3:::{d}/{key}") for d in dest_buckets for a in DEST_OBJECT_ACTIONS])
    optional = ([(a, f"arn:aws:s3:::{bucket}/{key}", lost) for a, lost in OPTIONAL_SOURCE_OBJECT_ACTIONS.items()]
                + [(a, f"arn:aws:s3:::{d}/{key}", lost) for d in dest_buckets for a, lost in OPTIONAL_DEST_OBJECT_ACTIONS.items()])
    denied = [f"{a} on {r}" for a, r in needed if not _allows(statements, a, r)]
    lacking = [f"{a} on {r}: {lost}" for a, r, lost in optional if not _allows(statements, a, r)]
    if denied:
        checks.append(Check("replication role permissions", FAIL, f"{role_arn}: its policies do not allow {'; '.join(denied)}",
                            "attach this policy to the role (conditions and permission boundaries were not evaluated)",
                            role_policy(bucket, dest_buckets, prefix)))
    elif lacking:
        checks.append(Check("replication role permissions", WARN, f"{role_arn}: allows what replicating the probes needs, "
                            f"but not {'; '.join(lacking)} (probes carry no tags and replmon's rule does not replicate "
                            "delete markers, so probes still work)",
                            "optional: allow these actions if the route's own objects need their tags or delete markers replicated"))
    else:
        checks.append(Check("replication role permissions", PASS, f"{role_arn}: allows every replication action on the probe prefix "
                            "(identity policies; conditions, boundaries and SCPs not evaluated)"))
    return checks


def policy_document(doc: Any) -> dict[str, Any]:
    """IAM returns policy documents URL-decoded by boto3 as dicts, some SDKs as JSON strings."""
    return json.loads(doc) if isinstance(doc, str) else dict(doc or {})
