"""`replmon routes`: routes from the buckets' replication configurations (fleet/discovery.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from replmon.cli.common import INFRASTRUCTURE, OK, aws_region_or_fail, check_url, fail
from replmon.cli.render import FORMAT_HELP, Format, emit, err
from replmon.core.defaults import DEFAULTS


def routes_cmd(
    source_bucket: Annotated[list[str], typer.Option(metavar="BUCKET", help="A replication source bucket (repeat for "
                                                     "several).")] = [],  # noqa: B006
    account: Annotated[str | None, typer.Option(metavar="ID", help="Instead of --source-bucket: every bucket of this "
                                                "account, read through its MemberRolePrefix-inventory role as the "
                                                "inventory reads it (nothing is written).")] = None,
    member_role_prefix: Annotated[str, typer.Option(metavar="PREFIX", help="With --account: the member roles' prefix "
                                                    "(MemberRolePrefix).")] = DEFAULTS.member_role_prefix,
    prefix: Annotated[str, typer.Option(metavar="PREFIX", help="The probe prefix the routes' probes use.")] = DEFAULTS.probe_prefix,
    role: Annotated[list[str], typer.Option(metavar="ACCOUNT=ROLE_ARN", help="The role replmon assumes for destinations in "
                                            "that account (repeat).")] = [],  # noqa: B006
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", metavar="URL",
                                                        help="An S3-compatible URL (e.g. the lab's MinIO); omit for AWS.")] = None,
    source_region: Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="The source buckets' AWS Region.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                                help="AWS profile (else the default credential chain).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
    endpoint_url: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --source-endpoint.")] = None,
    region: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --source-region.")] = None,
) -> int:
    """Routes from the buckets' replication configurations.

    Every rule and destination, and the probe route each source gives (--format json prints a
    probe request's "routes"). Reads S3 with the default AWS credential chain or --profile.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.core.route import Endpoint
    from replmon.fleet.discovery import discover

    if account is not None:
        if source_bucket:
            fail("--account or --source-bucket: one of them (an account's every bucket, or the buckets named)")
        return _account_routes(account, member_role_prefix, prefix, source_region, profile, fmt)
    if not source_bucket:
        fail("--source-bucket: which bucket? (repeat for several), or --account ID for every bucket of an account")
    if endpoint_url is not None:  # the old names (CHANGELOG 0.2.0)
        err.print("--endpoint-url is deprecated: use --source-endpoint", highlight=False)
        source_endpoint = endpoint_url
    if region is not None:
        err.print("--region is deprecated here: use --source-region", highlight=False)
        source_region = region
    endpoint_url, region = source_endpoint, source_region
    check_url(endpoint_url, "--source-endpoint")
    roles = {}
    for r in role:
        account, sep, arn = r.partition("=")
        if not sep or not account.isdigit() or len(account) != 12:
            fail(f"--role {r!r}: use ACCOUNT=ROLE_ARN, e.g. 123456789012=arn:aws:iam::123456789012:role/replmon-reader")
        roles[account] = arn
    aws_region_or_fail(region, endpoint_url, "--source-region", profile)
    s3 = clients.client("s3", clients.STORE, region=region, endpoint_url=endpoint_url, profile=profile)
    rows, found, notes = [], [], []
    for bucket in source_bucket:
        try:
            cfg = s3.get_bucket_replication(Bucket=bucket)["ReplicationConfiguration"]
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            if code == "ReplicationConfigurationNotFoundError":
                notes.append(f"{bucket}: no replication configuration")
                continue
            fail(f"{bucket}: GetBucketReplication: {code}", INFRASTRUCTURE)
        except BotoCoreError as exc:
            fail(f"{bucket}: {explain(exc)}", INFRASTRUCTURE)
        d = discover(bucket, cfg, prefix, roles=roles, source=Endpoint(bucket=bucket, region=region, endpoint_url=endpoint_url))
        notes += [f"{bucket}: {n}" for n in d.notes]
        rows += [{"source": bucket, **r.to_json()} for r in d.rules]
        if d.route:
            found.append(d.route.model_dump(mode="json", exclude_none=True))
    emit(rows, fmt, f"{len(rows)} rules, {len(found)} probe routes",
         columns=["source", "rule_id", "priority", "status", "prefix", "destination_bucket", "account", "rtc", "metrics", "covers_probes", "chosen"],
         document={"routes": found, "rules": rows, "notes": notes})
    if fmt is Format.table:
        for n in notes:
            err.print(f"note: {n}", highlight=False)
    return OK


def _account_routes(account: str, role_prefix: str, prefix: str, region: str | None, profile: str | None, fmt: Format) -> int:
    """``--account``: the inventory's reading of one account (fleet/inventory.py), printed, not written."""
    import time

    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.adapters.member_buckets import AwsMembers, default_client
    from replmon.core.names import ACCOUNT_RE
    from replmon.core.ports import AccessDenied
    from replmon.fleet.accounts import InventorySettings
    from replmon.fleet.inventory import survey_account

    if not ACCOUNT_RE.fullmatch(account):
        fail(f"--account {account!r}: a 12-digit account id, e.g. 111122223333")

    def make(service: str, reg: str | None, creds: object) -> object:  # STS with the caller's profile
        return default_client(service, reg, creds) if creds else clients.client(service, clients.CONTROL, region=reg or region,  # type: ignore[arg-type]
                                                                               profile=profile)

    try:
        reader = AwsMembers(role_prefix, make_client=make).open(account)
        results = survey_account(reader, settings=InventorySettings(), probe_prefix=prefix, groups=1, members=[account],
                                 now=time.time())
    except AccessDenied as exc:
        fail(f"--account {account}: {exc}; deploy templates/member-account.yaml there (or check --member-role-prefix)", INFRASTRUCTURE)
    except Exception as exc:
        fail(f"--account {account}: {explain(exc)}", INFRASTRUCTURE)
    rows = []
    for r in results:
        if r.route is not None:
            rows.append({"bucket": r.bucket, "mode": r.route.verdict.mode.value, "reason": r.route.verdict.reason_code.value,
                         "destinations": [d.bucket for d in r.route.destinations], "detail": r.route.verdict.reason})
        elif r.denied is not None:
            rows.append({"bucket": r.bucket, "mode": "off", "reason": "ACCESS_DENIED", "destinations": [], "detail": r.denied["reason"]})
    not_replicated = sum(1 for r in results if r.not_replicated)
    emit(rows, fmt, f"account {account}: {len(results)} buckets, {len(rows)} replicated or unreadable, {not_replicated} not replicated",
         columns=["bucket", "mode", "reason", "destinations", "detail"],
         document={"account": account, "buckets": len(results), "not_replicated": not_replicated, "routes": rows})
    return OK
