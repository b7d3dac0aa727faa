"""`replmon events parse` and `replmon routes`: the passive side's two offline-friendly commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from replmon.cli.app import app
from replmon.cli.common import FORMAT_HELP, MEASURED_FAILURE, OK, Format, emit, fail

events_app = typer.Typer(no_args_is_help=True, help="S3 event notifications: what IngestEvents would store.")
app.add_typer(events_app, name="events")


def _routes_from(path: Path | None) -> list[Any]:
    from pydantic import ValidationError

    from replmon.probe.request import Route

    if path is None:
        return []
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        fail(f"--routes {path}: {exc}")
    items = raw.get("routes", raw) if isinstance(raw, dict) else raw
    try:
        return [Route.model_validate(r) for r in items]
    except ValidationError as exc:
        fail(f"--routes {path}: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))


@events_app.command("parse")
def parse(
    file: Annotated[Path, typer.Argument(help="A payload as delivered: an SQS batch, a bare S3 notification, an EventBridge event, or one record ('-' reads stdin).")],
    routes: Annotated[Path | None, typer.Option(help="JSON routes (a probe request, or its routes list): events map onto them.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Print what would be stored for each record, and which records fail and why (exit 1 if any)."""
    import sys

    from replmon.signals.ingest import plan, probe_prefixes
    from replmon.signals.s3events import parse_payload

    try:
        text = sys.stdin.read() if str(file) == "-" else file.read_text()
    except OSError as exc:
        fail(f"{file}: {exc.strerror}")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{file}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})", MEASURED_FAILURE)
    rs = _routes_from(routes)
    plans = [plan(p, rs, probe_prefixes(rs)) for p in parse_payload(payload)]
    docs = [p.to_json() for p in plans]
    failed = [d for d in docs if d.get("error")]
    rows = []
    for d in docs:
        sig = d.get("signal", {})
        what = ("fail" if d.get("error") else "store" if d.get("store") else "ack" if d.get("acknowledged") else "ignore")
        rows.append({"position": d["position"], "outcome": what, "type": sig.get("kind") or sig.get("event_name") or "",
                     "route": (d.get("store") or {}).get("route", ""), "key": sig.get("key", ""),
                     "why": d.get("error") or d.get("acknowledged") or d.get("ignored") or ""})
    emit(rows, fmt, f"{len(docs)} records, {len(failed)} failing", columns=["position", "outcome", "type", "route", "key", "why"],
         document={"records": docs, "failures": [{"position": d["position"], "message_id": d["message_id"], "error": d["error"]} for d in failed]})
    return MEASURED_FAILURE if failed else OK


@app.command("routes")
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
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    from replmon.cli.common import INFRASTRUCTURE, aws_region_or_fail, check_url
    from replmon.fleet.discovery import discover
    from replmon.local.execution import _why
    from replmon.probe.request import Endpoint

    check_url(endpoint_url, "--endpoint-url")
    roles = {}
    for r in role:
        account, sep, arn = r.partition("=")
        if not sep or not account.isdigit() or len(account) != 12:
            fail(f"--role {r!r}: use ACCOUNT=ROLE_ARN, e.g. 123456789012=arn:aws:iam::123456789012:role/replmon-reader")
        roles[account] = arn
    aws_region_or_fail(region, endpoint_url, "--region", profile)
    session = boto3.session.Session(profile_name=profile)
    s3 = session.client("s3", endpoint_url=endpoint_url, region_name=region or ("us-east-1" if endpoint_url else None),
                        config=Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=3, read_timeout=10,
                                      s3={"addressing_style": "path"} if endpoint_url else None))
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
            fail(f"{bucket}: {_why(exc)}", INFRASTRUCTURE)
        d = discover(bucket, cfg, prefix, roles=roles, source=Endpoint(bucket=bucket, region=region, endpoint_url=endpoint_url))
        notes += [f"{bucket}: {n}" for n in d.notes]
        rows += [{"source": bucket, **r.to_json()} for r in d.rules]
        if d.route:
            found.append(d.route.model_dump(mode="json", exclude_none=True))
    emit(rows, fmt, f"{len(rows)} rules, {len(found)} probe routes",
         columns=["source", "rule_id", "priority", "status", "prefix", "destination_bucket", "account", "rtc", "metrics", "covers_probes", "chosen"],
         document={"routes": found, "rules": rows, "notes": notes})
    if fmt is Format.table:
        from replmon.cli.common import err

        for n in notes:
            err.print(f"note: {n}", highlight=False)
    return OK
