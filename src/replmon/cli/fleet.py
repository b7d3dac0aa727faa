"""`replmon fleet`: the route registry (docs/design/fleet.md 1-3).

    replmon fleet --stack-name replmon                  # every route: group, origin, mode, reason
    replmon fleet put route.json --stack-name replmon   # an explicit route (wins over discovery)
    replmon fleet inventory --stack-name replmon --member-accounts 444455556666 --dry-run
    replmon fleet release dr-orders --stack-name replmon  # end a dead or hung run's lease by hand
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replmon.cli.common import INFRASTRUCTURE, OK, USAGE, aws_region_or_fail, check_url, config_message, fail, stack_outputs
from replmon.cli.render import FORMAT_HELP, Format, emit, err
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.registry import MAX_ROUTE_GROUPS, InvalidRoute, RouteSpec

fleet_app = typer.Typer(rich_markup_mode=None, invoke_without_command=True,
                        help="The route registry: every route the deployment measures, and why a route is not probed.")

Table = Annotated[str | None, typer.Option(envvar="REPLMON_TABLE", metavar="NAME", help="Latency table (or --stack-name).")]
Stack = Annotated[str | None, typer.Option(metavar="STACK", help="A deployed replmon stack: the table from its outputs.")]
Region = Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="AWS Region of the table and stack.")]
Profile = Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                             help="AWS profile (else the default credential chain).")]
DynamoEndpoint = Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", metavar="URL",
                                                    help="A DynamoDB-compatible URL, e.g. the lab's; omit for AWS.")]
Groups = Annotated[int, typer.Option(min=1, max=MAX_ROUTE_GROUPS, metavar="N", help="The stack's RouteGroups (1-8).")]
COLUMNS = ["name", "group", "origin", "mode", "reason", "destinations", "regions", "accounts"]


def _registry(table: str | None, stack_name: str | None, region: str | None, profile: str | None, endpoint: str | None) -> Any:
    from replmon.adapters import clients
    from replmon.adapters.registry_table import DynamoRegistry

    check_url(endpoint, "--dynamodb-endpoint")
    aws_region_or_fail(region, endpoint, "--region", profile)
    if stack_name:
        table = stack_outputs(stack_name, region, profile).get("LatencyTableName")
    if not table:
        if not endpoint:
            fail("--table or --stack-name: which latency table? (the deployed stack's output LatencyTableName)")
        table = "replmon-latency"  # the lab's
    return DynamoRegistry(table, clients.dynamodb(clients.READ, endpoint_url=endpoint, region=region, profile=profile))


def route_row(spec: RouteSpec) -> dict[str, Any]:
    """One registry route as a table row (a drifted explicit route shows what the inventory sees)."""
    reason = spec.verdict.reason_code.value
    if spec.verdict_observed is not None and spec.verdict_observed.reason_code is not spec.verdict.reason_code:
        reason += f" (inventory sees: {spec.verdict_observed.reason_code.value})"
    return {"name": spec.name, "group": spec.group, "origin": spec.origin.value, "mode": spec.verdict.mode.value, "reason": reason,
            "destinations": [d.bucket for d in spec.destinations],
            "regions": f"{spec.source.region}>{','.join(sorted({d.region for d in spec.destinations}))}",
            "accounts": sorted({spec.source.account, *(d.account for d in spec.destinations)})}


def route_json(spec: RouteSpec) -> dict[str, Any]:
    return {"name": spec.name, "group": spec.group, "origin": spec.origin.value, "mode": spec.verdict.mode.value,
            "reason_code": spec.verdict.reason_code.value, "reason": spec.verdict.reason,
            "observed_reason_code": spec.verdict_observed.reason_code.value if spec.verdict_observed else None,
            "superseded_by": spec.superseded_by, "version": spec.version,
            "source": spec.source.model_dump(mode="json", exclude_none=True),
            "destinations": [d.model_dump(mode="json", exclude_none=True) for d in spec.destinations],
            "checked_at": spec.verdict.checked_at}


def _document(specs: list[RouteSpec], accounts: dict[str, dict[str, Any]], invalid: list[InvalidRoute]) -> dict[str, Any]:
    from replmon import __version__
    from replmon.core.keys import iso_ms

    return {"schema_version": 1, "replmon_version": __version__, "command": "fleet", "generated_at": iso_ms(time.time()),
            "routes": [route_json(s) for s in specs],
            "invalid": [bad.to_json() for bad in invalid],
            "accounts": [{"account": a, "status": str(r.get("status", "")), "reason": r.get("reason"),
                          **{k: int(r.get(k, 0)) for k in ("buckets", "replicated", "not_replicated", "routes", "denied")}}
                         for a, r in sorted(accounts.items())]}


@fleet_app.callback(invoke_without_command=True)
def fleet(
    ctx: typer.Context,
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> None:
    """Every route in the registry: group, origin, mode, reason, destinations, Regions, accounts.

    Routes that are not probed are listed with their reason; explicit routes the inventory sees
    differently say so. Subcommands write explicit routes and run the inventory.
    """
    ctx.obj = _Where(table, stack_name, region, profile, dynamodb_endpoint, fmt)  # the group's options reach the subcommands
    if ctx.invoked_subcommand is not None:
        return
    from replmon.adapters.explain import explain
    from replmon.core.registry import group_names, read_registry

    registry = _registry(table, stack_name, region, profile, dynamodb_endpoint)
    try:  # each item and each group on its own: a bad item or an unreadable group is named, the others listed
        read = read_registry(registry, group_names(MAX_ROUTE_GROUPS), explain)  # no group answering raises: the table
        accounts = registry.accounts()
    except Exception as exc:
        fail(f"latency store {registry.table!r}: {explain(exc)}", INFRASTRUCTURE)
    specs: list[RouteSpec] = sorted(read.routes, key=lambda s: s.name)
    invalid: list[InvalidRoute] = read.invalid
    probing = sum(1 for s in specs if s.probing)
    title = f"{len(specs)} routes, {probing} probed" + (f", {len(invalid)} invalid items skipped" if invalid else "")
    emit([route_row(s) for s in specs], fmt, title, COLUMNS, document=_document(specs, accounts, invalid))
    if fmt is Format.table:
        for bad in invalid:  # each skipped item: its name, the field and the fix (fleet put FILE replaces it)
            err.print(bad.line() + "; fix it with replmon fleet put FILE", highlight=False, soft_wrap=True)
        for account, row in sorted(accounts.items()):
            if row.get("status") not in (None, "OK") or row.get("denied"):
                err.print(f"account {account}: {row.get('status')}: {row.get('reason') or row.get('denied_reads')}", highlight=False)
    raise typer.Exit(OK)


class _Where:
    """Where the registry is, as the group command was told (``replmon fleet --table T put FILE``)."""

    def __init__(self, table: str | None, stack_name: str | None, region: str | None, profile: str | None,
                 endpoint: str | None, fmt: Format = Format.table) -> None:
        self.table, self.stack_name, self.region, self.profile, self.endpoint = table, stack_name, region, profile, endpoint
        self.fmt = fmt

    def registry(self, table: str | None, stack_name: str | None, region: str | None, profile: str | None,
                 endpoint: str | None) -> Any:
        """The subcommand's own options, else the group's."""
        return _registry(table or self.table, stack_name or self.stack_name, region or self.region, profile or self.profile,
                         endpoint or self.endpoint)


def _subcommand_registry(ctx: typer.Context, table: str | None, stack_name: str | None, region: str | None,
                         profile: str | None, endpoint: str | None) -> Any:
    where = ctx.obj if isinstance(ctx.obj, _Where) else _Where(None, None, None, None, None)
    return where.registry(table, stack_name, region, profile, endpoint)


@fleet_app.command("put")
def put(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE|-", help="A route as JSON (core/registry.py RouteSpec); - reads stdin.")],
    route_groups: Groups = DEFAULTS.route_groups,
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
    fmt: Annotated[Format | None, typer.Option("--format", help=FORMAT_HELP + " (default: the group's --format)")] = None,
) -> int:
    """Write an explicit route (it wins over discovered ones).

    An explicit route wins over the inventory's discovered route of its name or source bucket.
    "group" and "origin" may be left out (computed; origin is explicit). With "version", the write
    happens only if the route still has that version (an edit of what you read); without it, over
    the current item.
    """
    from replmon.core.registry import group_of, load_route_spec
    from replmon.fleet.caps import check_heartbeat_room

    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except OSError as exc:
        fail(f"FILE {file}: {exc.strerror or exc}")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"FILE {file}: not JSON ({exc.msg} at line {exc.lineno}); give one route object")
    if not isinstance(raw, dict):
        fail(f"FILE {file}: give one route object ({{\"name\": ..., \"source\": ..., \"destinations\": [...]}}), not {type(raw).__name__}")
    if raw.get("origin", "explicit") != "explicit":
        fail(f"origin: {raw['origin']!r}: routes written with fleet put are explicit; drop the field")
    name = raw.get("name")
    if isinstance(name, str) and name:
        want = group_of(name, route_groups)
        if raw.get("group", want) != want:
            fail(f"group: {raw['group']!r}, but {name!r} belongs to {want} with RouteGroups={route_groups}; drop the field")
        raw = {**raw, "group": want}
    expected = raw.pop("version", None)
    try:
        spec = load_route_spec({"origin": "explicit", **raw})
    except ConfigError as exc:
        fail(config_message(exc))
    registry = _subcommand_registry(ctx, table, stack_name, region, profile, dynamodb_endpoint)
    try:
        group_routes = registry.routes(spec.group)
    except Exception as exc:
        from replmon.adapters.explain import explain

        fail(f"latency store {registry.table!r}: {explain(exc)}", INFRASTRUCTURE)
    try:
        check_heartbeat_room(spec, group_routes)  # one Heartbeat invocation serves a group (fleet/caps.py)
    except ConfigError as exc:
        fail(config_message(exc))
    try:
        if expected is None:
            try:
                current = registry.get_route(spec.group, spec.name)
                expected = current.version if current is not None else None
            except ConfigError:  # the stored item is invalid: this put replaces it (on the version it has)
                expected = registry.item_version(spec.group, spec.name)
        written = registry.put_explicit(spec, expected)
    except Exception as exc:
        from replmon.adapters.explain import explain

        fail(f"latency store {registry.table!r}: {explain(exc)}", INFRASTRUCTURE)
    if not written:
        fail(f"version: route {spec.name} changed since version {expected}; read it again (replmon fleet --format json) "
             "and re-apply your edit", USAGE)
    fmt = fmt or (ctx.obj.fmt if isinstance(ctx.obj, _Where) else Format.table)
    version = (expected or 0) + 1
    if fmt is Format.table:
        err.print(f"route {spec.name}: written to {spec.group} as version {version} (explicit)", highlight=False)
    else:
        row = {"route": spec.name, "group": spec.group, "version": version, "origin": "explicit"}
        emit([row], fmt, document={"schema_version": 1, "command": "fleet put", **row})
    return OK


@fleet_app.command("release")
def release(
    ctx: typer.Context,
    route: Annotated[str, typer.Argument(metavar="ROUTE", help="The route whose run lease to end.")],
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
) -> int:
    """End a route's run lease by hand (a run that died or hangs holds it until its expiry).

    The next run probes the route. The release is recorded in the route's run items
    (<route>#runs / <time>#released: the holder, its expiry, who released it). A run that still
    probes the route is not stopped: stop its execution first.
    """
    import getpass
    import socket

    from replmon.adapters.explain import explain
    from replmon.adapters.leases import DynamoLeases
    from replmon.cli.common import NOT_RECORDED
    from replmon.core.names import check_route_name
    from replmon.fleet.lease import ReleaseNotRecorded, release_by_hand

    try:
        check_route_name(route)
    except ValueError as exc:
        fail(f"ROUTE: {exc}")
    registry = _subcommand_registry(ctx, table, stack_name, region, profile, dynamodb_endpoint)
    store = DynamoLeases(registry.table, registry.client)
    try:
        by = f"{getpass.getuser()}@{socket.gethostname()}"
    except Exception:  # no user name in this environment
        by = f"replmon fleet release@{socket.gethostname()}"
    def expiry(at: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "?"

    try:
        ended = release_by_hand(store, route, by, time.time())
    except ReleaseNotRecorded as exc:  # released all the same: the next run probes the route
        fail(f"route {route}: lease of {exc.lease.holder} (until {expiry(exc.lease.until)}) released by {by}, but the record "
             f"of it could not be written to {route}#runs: {explain(exc.cause) if isinstance(exc.cause, Exception) else exc}",
             NOT_RECORDED)
    except Exception as exc:
        fail(f"latency store {registry.table!r}: {explain(exc)}; the lease of route {route} is not released", INFRASTRUCTURE)
    if ended is None:
        err.print(f"route {route}: no run holds its lease; nothing to release", highlight=False)
        return OK
    err.print(f"route {route}: lease of {ended.holder} (until {expiry(ended.until)}) released by {by}; recorded in {route}#runs",
              highlight=False, soft_wrap=True)
    return OK


@fleet_app.command("inventory")
def inventory(
    ctx: typer.Context,
    member_accounts: Annotated[str, typer.Option(metavar="IDS", help="Member accounts, comma-separated (MemberAccounts); "
                                                 "the caller's account is always read.")] = "",
    discover_organization: Annotated[bool, typer.Option(help="Add every ACTIVE account of the organization "
                                                        "(DiscoverOrganizationAccounts).")] = False,
    member_role_prefix: Annotated[str, typer.Option(metavar="PREFIX", help="Member roles are PREFIX-inventory etc. "
                                                    "(MemberRolePrefix).")] = DEFAULTS.member_role_prefix,
    external_id_env: Annotated[str | None, typer.Option(metavar="VAR", help="Environment variable holding the roles' "
                                                        "ExternalId (MemberExternalId).")] = None,
    opt_out_tag: Annotated[str, typer.Option(metavar="KEY=VALUE", help="Source buckets tagged so are not probed "
                                             "(OptOutTag).")] = DEFAULTS.opt_out_tag,
    route_groups: Groups = DEFAULTS.route_groups,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what the inventory would write; write nothing.")] = False,
    max_seconds: Annotated[float, typer.Option(metavar="SECONDS", min=10, help="Stop with a checkpoint after this long "
                                               "(the next run resumes).")] = 840.0,
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Run the inventory now, with your credentials.

    Your credentials must be able to assume each account's PREFIX-inventory role
    (templates/member-account.yaml), as the Inventory function does.
    """
    import os

    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.adapters.member_buckets import AwsMembers, default_client
    from replmon.core.fleetconfig import FleetSettings
    from replmon.fleet.accounts import load_inventory_settings
    from replmon.fleet.inventory import InventoryDeps, run_inventory
    from replmon.fleet.registrar import PreviewRegistry

    try:
        settings = load_inventory_settings({"member_accounts": member_accounts, "discover_organization": discover_organization,
                                            "opt_out_tag": opt_out_tag})
        fleet_settings = FleetSettings(route_groups=route_groups, member_role_prefix=member_role_prefix)
    except (ConfigError, ValueError) as exc:
        fail(config_message(exc) if isinstance(exc, ConfigError) else str(exc))
    external_id = os.environ.get(external_id_env) if external_id_env else None
    if external_id_env and not external_id:
        fail(f"--external-id-env: {external_id_env} is not set; export it or drop the flag")
    registry = _subcommand_registry(ctx, table, stack_name, region, profile, dynamodb_endpoint)
    store: Any = PreviewRegistry(registry) if dry_run else registry
    try:
        hub = clients.client("sts", clients.CONTROL, region=region, profile=profile).get_caller_identity()["Account"]

        def make(service: str, reg: str | None, creds: Any) -> Any:  # the caller's profile for STS and Organizations
            return default_client(service, reg, creds) if creds else clients.client(service, clients.CONTROL, region=reg or region,
                                                                                   profile=profile)

        members = AwsMembers(member_role_prefix, external_id, make_client=make)
        now = time.time()
        summary = run_inventory(InventoryDeps(registry=store, rows=store, members=members, hub_account=hub, settings=settings,
                                              fleet=fleet_settings), now, now + max_seconds)
    except ConfigError as exc:
        fail(config_message(exc))
    except Exception as exc:
        fail(f"inventory: {explain(exc)}", INFRASTRUCTURE)
    if summary.held_by is not None:
        until = summary.held_by.get("until")
        at = time.strftime("%H:%M:%S UTC", time.gmtime(float(until))) if isinstance(until, (int, float)) else "?"
        fail(f"inventory: another run holds the inventory's lease ({summary.held_by.get('holder')}, until {at}); "
             "run it again after that, or use --dry-run", INFRASTRUCTURE)
    rows = [route_row(s) for s in summary.routes]
    document = {**summary.to_json(), "dry_run": dry_run, "writes": store.writes if dry_run else None}
    emit(rows, fmt, f"inventory {summary.run_id}: {len(rows)} routes{' (dry run: nothing written)' if dry_run else ''}",
         COLUMNS, document=document)
    if fmt is Format.table:
        for account, row in summary.accounts.items():
            err.print(f"account {account}: {row.get('status')} {row.get('reason') or ''}".rstrip(), highlight=False)
        if not summary.complete:
            err.print("stopped at --max-seconds: run it again to resume from the checkpoint", highlight=False)
    return OK


Apply = Annotated[bool, typer.Option("--apply", help="Write the merged configurations; without it nothing is changed (a dry run).")]
RouteNames = Annotated[list[str] | None, typer.Option("--route", metavar="ROUTE", help="Only this route's buckets (repeat; default: every route).")]
RolePrefix = Annotated[str, typer.Option(metavar="PREFIX", help="Member buckets are read and written as PREFIX-prober "
                                         "(MemberRolePrefix).")]
ExternalIdEnv = Annotated[str | None, typer.Option(metavar="VAR", help="Environment variable holding the roles' ExternalId "
                                                   "(MemberExternalId).")]


def _bucket_store(profile: str | None, external_id_env: str | None) -> Any:
    import os

    from replmon.adapters.member_buckets import BucketNotifications
    from replmon.cli.common import keys_from_env

    external_id = os.environ.get(external_id_env) if external_id_env else None
    if external_id_env and not external_id:
        fail(f"--external-id-env: {external_id_env} is not set; export it or drop the flag")
    return BucketNotifications(profile=profile, external_id=external_id, keys=keys_from_env("REPLMON_"))


def _stack(stack: str, region: str | None, profile: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """A deployed stack's outputs and parameters (one DescribeStacks)."""
    from replmon.adapters import clients
    from replmon.adapters.explain import explain

    try:
        [s] = clients.client("cloudformation", clients.CONTROL, region=region, profile=profile).describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    return ({o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])},
            {p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])})


@fleet_app.command("enroll")
def enroll(
    ctx: typer.Context,
    route: RouteNames = None,
    apply: Apply = False,
    events_queue_arn: Annotated[str | None, typer.Option(metavar="ARN", help="The hub's events queue (default: the stack's "
                                                         "EventsQueueArn output).")] = None,
    events_topic_name: Annotated[str, typer.Option(metavar="NAME", help="The member-Region topics' name (EventsTopicName), for "
                                                   "buckets outside the hub's account and Region.")] = DEFAULTS.events_topic_name,
    events_target: Annotated[str | None, typer.Option(metavar="ARN", help="One target for every bucket instead (e.g. the lab's "
                                                      "arn:minio:sqs::REPLMON:webhook); no subscriptions.")] = None,
    member_role_prefix: RolePrefix = DEFAULTS.member_role_prefix,
    external_id_env: ExternalIdEnv = None,
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
    fmt: Annotated[Format | None, typer.Option("--format", help=FORMAT_HELP + " (default: the group's --format)")] = None,
) -> int:
    """Add replmon's notification entries to the routes' buckets (a dry run unless --apply).

    Each source gets replmon-events (s3:Replication:*, every key), each destination
    replmon-replicas-<hash of the prefix> (s3:ObjectCreated:* on the probe prefix), sent to the hub's events queue in
    its account and Region, else to the member-Region topic of the bucket's account and Region.
    Every entry already there is kept exactly; a merge S3 would reject (overlapping filters for
    one event type, a target in another Region) is refused with its fix. The hub's queue is
    subscribed to other accounts' topics. Running it again changes nothing (docs/ENROLL.md).
    """
    from replmon.adapters import clients
    from replmon.cli import enroll as wiring_cli
    from replmon.fleet.enroll import Hub

    where = ctx.obj if isinstance(ctx.obj, _Where) else _Where(None, None, None, None, None)
    registry = _subcommand_registry(ctx, table, stack_name, region, profile, dynamodb_endpoint)
    stack = stack_name or where.stack_name
    deployed = _stack(stack, region or where.region, profile or where.profile) if stack else ({}, {})
    queue = events_queue_arn or deployed[0].get("EventsQueueArn")
    if not queue and not events_target:
        fail("--events-queue-arn or --stack-name: where do the events go? (the stack's output EventsQueueArn), or --events-target")
    hub = Hub(queue, events_topic_name, queue.split(":")[1]) if queue else None  # the partition of the queue's ARN
    specs = wiring_cli.read_routes(registry, route or [])
    store = _bucket_store(profile or where.profile, external_id_env)

    def sns(reg: str) -> Any:  # the hub account's credentials: the queue's owner subscribes it
        return clients.client("sns", clients.CONTROL, region=reg, profile=profile or where.profile)

    plans, subs = wiring_cli.wire(True, specs, store, hub=hub, override=events_target, apply=apply,
                                  member_role_prefix=member_role_prefix, sns=sns)
    wiring_cli.show("fleet enroll", plans, subs, fmt or where.fmt, apply)
    for line in wiring_cli.unlisted_sources(subs, deployed[1].get("EventSourceAccounts")):  # warn, do not fail
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    return wiring_cli.exit_code(plans, subs)


@fleet_app.command("unenroll")
def unenroll(
    ctx: typer.Context,
    route: RouteNames = None,
    apply: Apply = False,
    member_role_prefix: RolePrefix = DEFAULTS.member_role_prefix,
    external_id_env: ExternalIdEnv = None,
    table: Table = None, stack_name: Stack = None, region: Region = None, profile: Profile = None,
    dynamodb_endpoint: DynamoEndpoint = None,
    fmt: Annotated[Format | None, typer.Option("--format", help=FORMAT_HELP + " (default: the group's --format)")] = None,
) -> int:
    """Remove replmon's notification entries (Id starting "replmon") from the routes' buckets.

    An entry another enrolled route of the registry still needs on that bucket stays. Every other entry, and EventBridge delivery, is written back as it was (a dry run unless
    --apply). Subscriptions are left: `replmon uninstall --fleet` prints the order to delete them.
    """
    from replmon.cli import enroll as wiring_cli

    where = ctx.obj if isinstance(ctx.obj, _Where) else _Where(None, None, None, None, None)
    registry = _subcommand_registry(ctx, table, stack_name, region, profile, dynamodb_endpoint)
    specs = wiring_cli.read_routes(registry, route or [])
    names = {s.name for s in specs}
    keep = [s for s in wiring_cli.read_routes(registry) if s.name not in names] if route else []  # their entries stay
    store = _bucket_store(profile or where.profile, external_id_env)
    plans, subs = wiring_cli.wire(False, specs, store, hub=None, override=None, apply=apply, member_role_prefix=member_role_prefix,
                                  keep=keep)
    wiring_cli.show("fleet unenroll", plans, subs, fmt or where.fmt, apply)
    return wiring_cli.exit_code(plans)
