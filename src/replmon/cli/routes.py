"""`replmon routes`: routes from the buckets' replication configurations (fleet/discovery.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from replmon.cli.common import INFRASTRUCTURE, OK, aws_region_or_fail, check_url, fail
from replmon.cli.render import FORMAT_HELP, Format, emit, err


def routes_cmd(
    source_bucket: Annotated[list[str], typer.Option(help="A replication source bucket (repeat for several).")],
    prefix: Annotated[str, typer.Option(help="The probe prefix the routes' probes use.")] = "replmon-probes/",
    role: Annotated[list[str], typer.Option(help="ACCOUNT=ROLE_ARN: the role replmon assumes for destinations in that account (repeat).")] = [],  # noqa: B006
    endpoint_url: Annotated[str | None, typer.Option(help="An S3-compatible endpoint (e.g. the lab's MinIO).")] = None,
    region: Annotated[str | None, typer.Option(envvar="AWS_REGION", help="The source buckets' region.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", help="AWS profile for credentials.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Routes from the buckets' replication configurations: every rule and destination, and the
    probe route each source gives (--format json prints a probe request's "routes")."""
    from botocore.exceptions import BotoCoreError, ClientError

    from replmon.adapters import clients
    from replmon.adapters.explain import explain
    from replmon.core.route import Endpoint
    from replmon.fleet.discovery import discover

    check_url(endpoint_url, "--endpoint-url")
    roles = {}
    for r in role:
        account, sep, arn = r.partition("=")
        if not sep or not account.isdigit() or len(account) != 12:
            fail(f"--role {r!r}: use ACCOUNT=ROLE_ARN, e.g. 123456789012=arn:aws:iam::123456789012:role/replmon-reader")
        roles[account] = arn
    aws_region_or_fail(region, endpoint_url, "--region", profile)
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
