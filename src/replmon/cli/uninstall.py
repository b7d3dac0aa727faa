"""`replmon uninstall`: leave nothing of replmon on the buckets - no probe or seed object (any
version, delete marker or incomplete upload), no notification entry, no lifecycle rule - and,
when asked, delete the retained latency table. A dry run unless --apply (docs/UNINSTALL.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from replmon.cli.common import INFRASTRUCTURE, OK, aws_region_or_fail, check_url, fail, keys_from_env
from replmon.cli.render import FORMAT_HELP, Format, emit, err
from replmon.core.defaults import DEFAULTS


def _stack(stack: str, region: str | None, profile: str | None) -> dict[str, dict[str, str]] | None:
    """The stack's outputs and parameters; None if it does not exist (any more)."""
    from botocore.exceptions import ClientError

    from replmon.adapters import clients
    from replmon.adapters.explain import explain

    cfn = clients.client("cloudformation", clients.CONTROL, region=region, profile=profile)
    try:
        [s] = cfn.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    except Exception as exc:
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    return {"outputs": {o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])},
            "parameters": {p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])}}


def uninstall(
    stack_name: Annotated[str | None, typer.Option(metavar="STACK", help="The deployed stack: buckets, prefixes, events queue "
                                                   "and table from its outputs and parameters.")] = None,
    source_bucket: Annotated[str | None, typer.Option(metavar="BUCKET", help="The source bucket (or --stack-name).")] = None,
    dest_bucket: Annotated[list[str] | None, typer.Option(metavar="BUCKET", help="A destination bucket (repeat; or --stack-name).")] = None,
    prefix: Annotated[str, typer.Option(metavar="PREFIX", help="The probe prefix (ProbePrefix).")] = DEFAULTS.probe_prefix,
    seed_prefix: Annotated[str, typer.Option(metavar="PREFIX", help="The seed prefix on the source (SeedPrefix).")] = DEFAULTS.seed_prefix,
    events_target: Annotated[list[str] | None, typer.Option(metavar="ARN", help="A queue or topic ARN whose notification "
                                                            "entries go too (repeat; the stack's EventsQueueArn by default).")] = None,
    table: Annotated[str | None, typer.Option(metavar="NAME", help="The latency table (retained when the stack is deleted).")] = None,
    delete_table: Annotated[bool, typer.Option("--delete-table", help="Also delete the latency table and its history (only "
                                               "once the stack is gone; turns deletion protection off first).")] = False,
    apply: Annotated[bool, typer.Option("--apply", help="Do it; without this flag nothing is changed (a dry run).")] = False,
    fleet: Annotated[bool, typer.Option("--fleet", help="Also every registry route's buckets (the table from --stack-name or "
                                        "--table): probe objects and replmon's notification entries, through each account's "
                                        "PREFIX-prober role; then the order to delete member stacks and subscriptions.")] = False,
    member_role_prefix: Annotated[str, typer.Option(metavar="PREFIX", help="With --fleet: member buckets are reached as "
                                                    "PREFIX-prober (MemberRolePrefix).")] = DEFAULTS.member_role_prefix,
    external_id_env: Annotated[str | None, typer.Option(metavar="VAR", help="With --fleet: environment variable holding the "
                                                        "member roles' ExternalId (MemberExternalId).")] = None,
    source_region: Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="The source bucket's AWS Region.")] = None,
    dest_region: Annotated[str | None, typer.Option(metavar="REGION", help="The destinations' AWS Region, if it differs.")] = None,
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", metavar="URL",
                                                        help="An S3-compatible URL; omit for AWS.")] = None,
    dest_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ENDPOINT", metavar="URL",
                                                      help="An S3-compatible URL; omit for AWS.")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", metavar="URL",
                                                          help="A DynamoDB-compatible URL; omit for AWS.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                                help="AWS profile (else the default credential chain).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Remove every trace of replmon from the buckets (a dry run unless --apply).

    Probe and seed objects (every version, delete marker and incomplete upload), replmon's
    notification entries and lifecycle rules (IDs starting "replmon", or entries sending to the
    stack's events queue), and with --delete-table the retained latency table. Everything else
    in each configuration (the other rules, the other notification entries, the lifecycle's
    TransitionDefaultMinimumObjectSize) is written back as it was. AWS calls use the default AWS credential
    chain or --profile; S3-compatible endpoints read REPLMON_ACCESS_KEY_ID and
    REPLMON_SECRET_ACCESS_KEY. Order: docs/UNINSTALL.md.
    """
    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.adapters.s3 import S3ObjectStore
    from replmon.fleet.offboard import lifecycle_without, notification_without

    check_url(source_endpoint, "--source-endpoint")
    check_url(dest_endpoint, "--dest-endpoint")
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    aws_region_or_fail(source_region, source_endpoint, "--source-region", profile)
    keys = keys_from_env("REPLMON_")
    targets = list(events_target or [])
    stack_exists = False
    if stack_name:
        found = _stack(stack_name, source_region, profile)
        if found is not None:
            stack_exists = True
            outputs, params = found["outputs"], found["parameters"]
            source_bucket = source_bucket or outputs.get("SourceBucket")
            dest_bucket = dest_bucket or ([outputs["DestinationBucket"]] if outputs.get("DestinationBucket") else None)
            table = table or outputs.get("LatencyTableName")
            prefix = params.get("ProbePrefix") or prefix
            seed_prefix = params.get("SeedPrefix") or seed_prefix
            targets += [outputs["EventsQueueArn"]] if outputs.get("EventsQueueArn") else []
        elif not source_bucket:
            fail(f"--stack-name {stack_name}: the stack does not exist (any more); name the buckets with --source-bucket and --dest-bucket")
    if delete_table and stack_exists:
        fail(f"--delete-table: stack {stack_name} still exists and owns the table; delete the stack first (sam delete), "
             "then run this again with --table")
    if delete_table and not table:
        fail("--delete-table: which table? pass --table NAME (the stack's LatencyTableName output)")
    if fleet and not table:
        fail("--fleet: which registry? pass --stack-name (its LatencyTableName output) or --table NAME")
    if not source_bucket and not (delete_table and table) and not fleet:
        fail("--source-bucket and --dest-bucket (or --stack-name, or --fleet with --table): which buckets?")

    sides: list[tuple[str, str, str | None, str | None, list[str]]] = []
    if source_bucket:
        sides.append(("source", source_bucket, source_endpoint, source_region, [prefix, seed_prefix]))
    sides += [("destination", b, dest_endpoint, dest_region or source_region, [prefix]) for b in dest_bucket or []]
    rows: list[dict[str, Any]] = []
    verb = "removed" if apply else "would remove"
    left = 0
    for role, bucket, endpoint, region, prefixes in sides:
        s3 = clients.client("s3", clients.CONTROL, region=region, endpoint_url=endpoint, keys=keys if endpoint else None, profile=profile)
        store = S3ObjectStore(s3, s3)
        try:
            for p in prefixes:
                versions, uploads = store.list_versions(bucket, p), _uploads(store, bucket, p)
                if apply:
                    store.delete_versions(bucket, versions)
                    for u in uploads:
                        store.abort_multipart(bucket, u.key, u.upload_id)
                    left += len(store.list_versions(bucket, p)) + len(_uploads(store, bucket, p))
                rows.append({"bucket": bucket, "side": role, "what": f"objects under {p}",
                             "found": len(versions) + len(uploads), "action": f"{verb} {len(versions)} versions, {len(uploads)} uploads"})
            notification = s3.get_bucket_notification_configuration(Bucket=bucket)
            kept, gone = notification_without(notification, targets)
            if gone and apply:
                s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=kept)
            rows.append({"bucket": bucket, "side": role, "what": "notification entries", "found": len(gone),
                         "action": f"{verb} {'; '.join(gone)}" if gone else "none of replmon's"})
            lifecycle = _lifecycle(s3, bucket)
            kept_rules, ids = lifecycle_without(list(lifecycle.get("Rules", [])))
            if ids and apply:
                if kept_rules:
                    # the bucket-wide setting beside the rules goes back as it was: the PUT's default
                    # (all_storage_classes_128K) would otherwise replace e.g. varies_by_storage_class
                    extra = {k: lifecycle[k] for k in ("TransitionDefaultMinimumObjectSize",) if lifecycle.get(k)}
                    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": kept_rules}, **extra)
                else:
                    s3.delete_bucket_lifecycle(Bucket=bucket)
            rows.append({"bucket": bucket, "side": role, "what": "lifecycle rules", "found": len(ids),
                         "action": f"{verb} {', '.join(ids)}" if ids else "none of replmon's"})
        except Exception as exc:
            fail(f"{role} bucket {bucket!r}: {explain(exc)}", INFRASTRUCTURE)
    order: list[str] = []
    if fleet:
        assert table is not None
        done = {(side[1], p) for side in sides for p in side[4]}
        hub_queue = next((t for t in targets if ":sqs:" in t), None)
        fleet_rows, fleet_left, order = _fleet(table, done, apply, member_role_prefix, external_id_env, stack_name,
                                               source_region, dynamodb_endpoint, profile, verb, hub_queue)
        rows += fleet_rows
        left += fleet_left
    if table:
        rows.append(_table_row(table, delete_table, apply, source_region, dynamodb_endpoint, profile))
    emit(rows, fmt, "replmon uninstall" + ("" if apply else " (dry run: nothing changed; --apply does it)"),
         columns=["bucket", "side", "what", "found", "action"],
         document={"schema_version": 1, "command": "uninstall", "applied": apply, "actions": rows, "left_behind": left,
                   **({"order": order} if fleet else {})})
    if order and fmt is Format.table:
        err.print("then, in this order:", highlight=False)
        for n, step in enumerate(order, 1):
            err.print(f"{n}. {step}", highlight=False, soft_wrap=True)
    if left:
        err.print(f"{left} object versions or uploads are still there (a probe run in flight? stop the schedule and run again)",
                  highlight=False)
        return INFRASTRUCTURE
    if stack_exists and apply and fmt is Format.table:
        err.print(f"next: sam delete --stack-name {stack_name} (the latency table {table} is retained; "
                  "`replmon uninstall --table NAME --delete-table --apply` deletes it)", highlight=False)
    return OK


def _uploads(store: Any, bucket: str, prefix: str) -> list[Any]:
    """Incomplete uploads under ``prefix``: listed without a prefix and filtered here, because MinIO
    lists an upload only for its exact key or no prefix (a folder prefix finds none: the lab shows
    it). ListMultipartUploads has no prefix condition key, so the IAM it needs is the same."""
    return [u for u in store.list_uploads(bucket, "") if u.key.startswith(prefix)]


def _lifecycle(s3: Any, bucket: str) -> dict[str, Any]:
    """GetBucketLifecycleConfiguration's answer (``Rules`` and ``TransitionDefaultMinimumObjectSize``), or {}."""
    from botocore.exceptions import ClientError

    try:
        return dict(s3.get_bucket_lifecycle_configuration(Bucket=bucket))
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchLifecycleConfiguration":
            return {}
        raise


def _table_row(table: str, delete: bool, apply: bool, region: str | None, endpoint: str | None, profile: str | None) -> dict[str, Any]:
    from replmon.adapters import clients
    from replmon.adapters.explain import explain

    row = {"bucket": "-", "side": "-", "what": f"latency table {table}", "found": 1}
    if not delete:
        return {**row, "action": "kept (the RPO history; --delete-table deletes it once the stack is gone)"}
    if not apply:
        return {**row, "action": "would delete (deletion protection turned off first)"}
    ddb = clients.dynamodb(clients.CONTROL, region=region, endpoint_url=endpoint, profile=profile)
    try:
        if ddb.describe_table(TableName=table)["Table"].get("DeletionProtectionEnabled"):
            ddb.update_table(TableName=table, DeletionProtectionEnabled=False)
        ddb.delete_table(TableName=table)
    except Exception as exc:
        fail(f"--table {table}: {explain(exc)}", INFRASTRUCTURE)
    return {**row, "action": "deleted"}


def _fleet(table: str, done: set[tuple[str, str]], apply: bool, member_role_prefix: str, external_id_env: str | None,
           stack_name: str | None, region: str | None, dynamodb_endpoint: str | None, profile: str | None,
           verb: str, hub_queue: str | None = None) -> tuple[list[dict[str, Any]], int, list[str]]:
    """Every registry route's buckets: probe objects under the route's prefix (every version,
    delete marker and incomplete upload) and replmon's notification entries, each bucket through its
    account's prober role; the rows, what is left after an apply, and the order of what remains."""
    import os

    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.adapters.member_buckets import BucketNotifications
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.adapters.s3 import S3ObjectStore
    from replmon.cli import enroll as wiring_cli

    external_id = os.environ.get(external_id_env) if external_id_env else None
    if external_id_env and not external_id:
        fail(f"--external-id-env: {external_id_env} is not set; export it or drop the flag")
    registry = DynamoRegistry(table, clients.dynamodb(clients.READ, endpoint_url=dynamodb_endpoint, region=region, profile=profile))
    try:
        specs = wiring_cli.read_routes(registry)
    except Exception as exc:
        fail(f"--fleet: registry in {table!r}: {explain(exc)}", INFRASTRUCTURE)
    store = BucketNotifications(profile=profile, external_id=external_id, keys=keys_from_env("REPLMON_"))
    where = wiring_cli.route_buckets(specs, member_role_prefix)
    rows: list[dict[str, Any]] = []
    left = 0
    cleaned = {bucket for bucket, _ in done}  # the stack's own pair: its notification entries were handled above
    for spec in specs:
        route = spec.to_route(member_role_prefix)
        for side, ep in [("source", route.source), *(("destination", d) for d in route.destinations)]:
            if (ep.bucket, route.prefix) in done:
                continue
            done.add((ep.bucket, route.prefix))
            role = None if ep.endpoint_url else ep.role_arn
            try:
                objects = S3ObjectStore(store.s3(ep.region, ep.endpoint_url, role))
                versions, uploads = objects.list_versions(ep.bucket, route.prefix), _uploads(objects, ep.bucket, route.prefix)
                if apply:
                    objects.delete_versions(ep.bucket, versions)
                    for u in uploads:
                        objects.abort_multipart(ep.bucket, u.key, u.upload_id)
                    left += len(objects.list_versions(ep.bucket, route.prefix)) + len(_uploads(objects, ep.bucket, route.prefix))
            except Exception as exc:
                fail(f"--fleet: route {spec.name}, {side} bucket {ep.bucket!r} (as {role or 'the caller'}): {explain(exc)}",
                     INFRASTRUCTURE)
            rows.append({"bucket": ep.bucket, "side": side, "what": f"objects under {route.prefix}",
                         "found": len(versions) + len(uploads), "action": f"{verb} {len(versions)} versions, {len(uploads)} uploads"})
    plans, _ = wiring_cli.wire(False, specs, store, hub=None, override=None, apply=apply, member_role_prefix=member_role_prefix)
    for p in plans:
        if p.bucket in cleaned:
            continue
        if p.action == wiring_cli.ERROR:
            fail(f"--fleet: bucket {p.bucket!r}: {p.reason}; {p.fix}", INFRASTRUCTURE)
        gone = [e.removeprefix("remove ") for e in p.entries if e.startswith("remove ")]
        rows.append({"bucket": p.bucket, "side": "+".join(p.sides), "what": "notification entries", "found": len(gone),
                     "action": f"{verb} {'; '.join(gone)}" if gone else "none of replmon's"})
    accounts = sorted({w.account for w in where.values() if w.account})
    hub = (hub_queue.split(":")[4], hub_queue.split(":")[3]) if hub_queue else None
    regions = sorted({(w.account, w.region) for w in where.values() if w.account and w.region and (w.account, w.region) != hub})
    stack = stack_name or "<hub stack>"
    order = [
        f"keep the hub's schedules disabled until its stack is deleted (sam deploy --stack-name {stack} --parameter-overrides "
        "ScheduleState=DISABLED, before this command: a run would put probes back)",
        "unsubscribe the hub's events queue from each member-Region topic in another account: aws sns list-subscriptions "
        "(in the hub account, each topic's Region), then aws sns unsubscribe --subscription-arn ARN",
        "delete the member-Region stacks, one per (account, Region) outside the hub's that holds a registry bucket: "
        + (", ".join(f"{a}/{r}" for a, r in regions) or "none")
        + " (with StackSets: aws cloudformation delete-stack-instances --stack-set-name NAME --accounts ... --regions ... "
        "--no-retain-stacks, then delete-stack-set)",
        f"delete the hub stack: sam delete --stack-name {stack} (the latency table is retained; --delete-table after)",
        "delete the member-account stacks (the roles; this command needed them) in every account, the hub's included: "
        + (", ".join(accounts) or "none in the registry") + " (StackSets: delete-stack-instances, then delete-stack-set)",
    ]
    return rows, left, order
