"""`replmon fleet enroll` / `unenroll` (and `uninstall --fleet`): the registry's routes' buckets,
each one's notification configuration read, merged (fleet/enroll.py), shown as a diff and, with
--apply, written back and read again to prove nothing of the user's was dropped or changed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replmon.cli.render import Format, emit, out
from replmon.core.registry import MAX_ROUTE_GROUPS, RouteSpec

#: What an apply that went wrong on one bucket reports (the others are still done).
ERROR = "error"
COLUMNS = ["bucket", "region", "side", "action", "entries", "reason"]


@dataclass
class Where:
    """How one bucket is reached: its account's prober role (None: the caller's credentials) or an endpoint."""

    account: str | None
    region: str | None
    endpoint_url: str | None
    role_arn: str | None
    sides: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()


def read_routes(registry: Any, names: Sequence[str] = ()) -> list[RouteSpec]:
    """Every registry route (or those named), in name order; an unknown name is a usage error."""
    from replmon.adapters.explain import explain
    from replmon.cli.common import INFRASTRUCTURE, fail
    from replmon.core.registry import group_names, read_group

    specs: list[RouteSpec] = []
    try:
        for group in group_names(MAX_ROUTE_GROUPS):
            specs += read_group(registry, group).routes
    except Exception as exc:
        fail(f"latency store {getattr(registry, 'table', '?')!r}: {explain(exc)}", INFRASTRUCTURE)
    specs.sort(key=lambda s: s.name)
    if names:
        unknown = sorted(set(names) - {s.name for s in specs})
        if unknown:
            fail(f"--route {', '.join(unknown)}: not in the registry (replmon fleet lists its routes)")
        specs = [s for s in specs if s.name in names]
    return specs


def route_buckets(specs: Iterable[RouteSpec], member_role_prefix: str | None, partition: str = "aws") -> dict[tuple[str, str], Where]:
    """(bucket, region) -> how to reach it, for every source and destination of ``specs``."""
    out: dict[tuple[str, str], Where] = {}
    for spec in specs:
        route = spec.to_route(member_role_prefix, partition)
        for side, ep in [("source", route.source), *(("destination", d) for d in route.destinations)]:
            k = (ep.bucket, ep.region or "")
            w = out.setdefault(k, Where(ep.account, ep.region, ep.endpoint_url, None if ep.endpoint_url else ep.role_arn))
            w.sides = tuple(dict.fromkeys((*w.sides, side)))
            w.routes = tuple(dict.fromkeys((*w.routes, spec.name)))
    return out


def wire(enroll: bool, specs: Sequence[RouteSpec], store: Any, *, hub: Any, override: str | None, apply: bool,
         member_role_prefix: str | None, sns: Any = None, keep: Sequence[RouteSpec] = ()) -> tuple[list[Any], list[dict[str, Any]]]:
    """Plan (and with ``apply`` do) every bucket's merge or removal; then the subscriptions.
    ``store``: adapters/member_buckets.py BucketNotifications; ``sns(region)``: an SNS client of the
    hub's account; ``keep`` (unenroll): the routes that stay enrolled, whose entries stay. Returns
    the bucket plans and the subscription rows."""
    from replmon.adapters.explain import explain
    from replmon.fleet import enroll as en

    where = route_buckets(specs, member_role_prefix)
    wanted = en.wanted_for(specs, hub, override) if enroll else {}
    kept = {} if enroll else en.wanted_for(keep, None, en.ANY_TARGET)  # what the other routes still need
    plans = []
    for (bucket, region), w in sorted(where.items()):
        if enroll and (bucket, region) not in wanted:  # only routes in mode off use it
            continue
        try:
            owner = None if w.endpoint_url else w.account  # ExpectedBucketOwner: S3 refuses if another account owns it now
            current = store.read(bucket, w.region, w.endpoint_url, w.role_arn, owner)
            plan = (en.plan_enroll(bucket, w.region, current, wanted[(bucket, region)]) if enroll else
                    en.plan_unenroll(bucket, w.region, current, w.sides, w.routes, kept.get((bucket, region), [])))
            if apply and plan.changes:
                store.write(bucket, w.region, w.endpoint_url, w.role_arn, plan.after, owner)
                lost = en.kept_intact(plan.before, store.read(bucket, w.region, w.endpoint_url, w.role_arn, owner))
                if lost:
                    plan.action, plan.reason = ERROR, f"after the put S3 no longer holds: {'; '.join(lost)}"
                    plan.fix = f"put back the 'before' configuration (--format json) with aws s3api put-bucket-notification-configuration --bucket {bucket}"
        except Exception as exc:
            from replmon.core.ports import AccessDenied

            denied = isinstance(exc, AccessDenied) or "AccessDenied" in str(exc)
            fix = (f"the caller must be able to assume {w.role_arn} and it must allow s3:GetBucketNotification and "
                   "s3:PutBucketNotification (templates/member-account.yaml, OperatorRoleArn)" if denied and w.role_arn else
                   "the caller's credentials must allow s3:GetBucketNotification and s3:PutBucketNotification" if denied else
                   "S3's message names the cause: at the put S3 tests every SNS/SQS destination in the configuration, "
                   "yours too, so a target whose policy does not let s3.amazonaws.com send to it, or a deleted queue or "
                   "topic of an existing entry, fails the whole put (docs/ENROLL.md, Credentials)")
            plan = en.BucketPlan(bucket, w.region, ERROR, {}, {}, [], explain(exc), fix, w.sides, w.routes)
        plan.sides, plan.routes = plan.sides or w.sides, plan.routes or w.routes
        plans.append(plan)
    subs: list[dict[str, Any]] = []
    if enroll and hub is not None and override is None:
        for topic in en.subscriptions(wanted, hub):
            row = {"topic": topic, "endpoint": hub.queue_arn, "action": "would subscribe (sqs, raw delivery)"}
            if apply and sns is not None:
                try:  # the queue's owner subscribes: no confirmation needed (docs/ENROLL.md, Credentials)
                    arn = sns(topic.split(":")[3]).subscribe(TopicArn=topic, Protocol="sqs", Endpoint=hub.queue_arn,
                                                              Attributes={"RawMessageDelivery": "true"},
                                                              ReturnSubscriptionArn=True)["SubscriptionArn"]
                    row["action"], row["subscription_arn"] = "subscribed", arn
                except Exception as exc:
                    row["action"], row["error"] = ERROR, explain(exc)
            subs.append(row)
    return plans, subs


def unlisted_sources(subs: Sequence[Mapping[str, Any]], source_accounts: str | None) -> list[str]:
    """One warning line per subscribed topic whose account is not in the hub's EventSourceAccounts
    (the stack parameter, comma-separated; None: not known, no warning): the queue policy's
    MemberRegionTopics statement admits only those accounts' topics, so SNS's deliveries from the
    others are refused at the queue and nothing arrives."""
    if source_accounts is None:
        return []
    listed = {a.strip() for a in source_accounts.split(",") if a.strip()}
    return [f"warning: {s['topic']}: account {s['topic'].split(':')[4]} is not in the stack's EventSourceAccounts "
            f"({', '.join(sorted(listed)) or 'empty'}): the events queue's policy refuses its deliveries; add it and update the stack"
            for s in subs if s["topic"].split(":")[4] not in listed]


def exit_code(plans: Sequence[Any], subs: Sequence[Mapping[str, Any]] = ()) -> int:
    """1 when a merge was refused (S3 would reject it), 3 when a bucket could not be read or written
    or a subscription failed."""
    from replmon.cli.exitcodes import Exit
    from replmon.fleet.enroll import REFUSED

    if any(p.action == ERROR for p in plans) or any(s.get("action") == ERROR for s in subs):
        return int(Exit.INFRASTRUCTURE)
    return int(Exit.BREACH) if any(p.action == REFUSED for p in plans) else int(Exit.OK)


def show(command: str, plans: Sequence[Any], subs: Sequence[Mapping[str, Any]], fmt: Format, apply: bool) -> None:
    """The table (then each bucket's diff and fix), the CSV (one row a bucket) or one JSON document."""
    rows = [{**p.to_json(), "side": "+".join(p.sides)} for p in plans]
    table_rows = [{**r, "entries": "; ".join(r["entries"])} for r in rows]  # one cell, read as text
    changed = sum(p.changes for p in plans)
    title = (f"{command}: {len(plans)} buckets, {changed} {'changed' if apply else 'to change'}, "
             f"{sum(p.action == 'refused' for p in plans)} refused" + ("" if apply else " (dry run: nothing changed; --apply does it)"))
    emit(table_rows, fmt, title, COLUMNS, document={"schema_version": 1, "command": command, "applied": apply,
                                             "buckets": rows, "subscriptions": list(subs)})
    if fmt is not Format.table:
        return
    for p in plans:
        for line in p.diff():
            out.print(line, highlight=False, markup=False, soft_wrap=True)
        if p.fix:
            out.print(f"fix ({p.bucket}): {p.fix}", highlight=False, markup=False, soft_wrap=True)
    for s in subs:
        out.print(f"subscription: {s['topic']} -> {s['endpoint']}: {s['action']}" + (f" {s.get('subscription_arn') or s.get('error') or ''}"),
                  highlight=False, markup=False, soft_wrap=True)

