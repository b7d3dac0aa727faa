"""`replmon probe`: one route, now, through the same state machine and handlers that deploy."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from replmon.cli.app import app
from replmon.cli.common import (
    EXIT_CODES_HELP,
    FORMAT_HELP,
    INFRASTRUCTURE,
    MEASURED_FAILURE,
    OK,
    Format,
    aws_region_or_fail,
    check_url,
    config_message,
    emit,
    err,
    fail,
    keys_from,
    stack_outputs,
)
from replmon.core.defaults import DEFAULTS
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.probe.request import ConfigError


def default_spool_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "replmon" / "spool"


DEFAULT_SPOOL = default_spool_dir()


def exit_code(records: list[ProbeRecord], planned: int, execution_ok: bool) -> int:
    """1 if replication was seen failing or late; else 3 if anything could not be measured or recorded; else 0."""
    if any(r.status in (ProbeStatus.FAILED, ProbeStatus.STUCK) or (r.status is ProbeStatus.COMPLETED and not r.within_target)
           for r in records):
        return MEASURED_FAILURE
    if not execution_ok or len(records) != planned or any(r.status is not ProbeStatus.COMPLETED for r in records):
        return INFRASTRUCTURE
    return OK


def record_rows(records: list[ProbeRecord]) -> list[dict[str, Any]]:
    return [{"probe_id": r.probe_id, "size": r.size_class, "trial": r.trial, "status": str(r.status),
             "latency_lo": r.latency_lo, "latency_hi": r.latency_hi, "latency_mid": r.latency_mid, "heads": r.head_count,
             "bound_s": r.bound_seconds, "bound_met": r.bound_met, "within_target": r.within_target,
             "failure_reason": r.failure_reason} for r in records]


@app.command(epilog=EXIT_CODES_HELP)
def probe(
    source_bucket: Annotated[str | None, typer.Option(help="Replication source bucket (or --stack-name).")] = None,
    dest_bucket: Annotated[list[str] | None, typer.Option(help="Destination bucket (repeat for several; or --stack-name).")] = None,
    stack_name: Annotated[str | None, typer.Option(help="A deployed replmon stack: table and buckets from its outputs.")] = None,
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", help="S3-compatible URL; omit for AWS.")] = None,
    dest_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ENDPOINT", help="S3-compatible URL; omit for AWS.")] = None,
    source_region: Annotated[str | None, typer.Option(envvar="AWS_REGION", help="The source bucket's AWS region.")] = None,
    dest_region: Annotated[str | None, typer.Option(help="The destination's AWS region, if it differs.")] = None,
    route: Annotated[str, typer.Option(help="Route name the records are kept under.")] = DEFAULTS.route_name,
    prefix: Annotated[str, typer.Option(help="Probe key prefix (the replication rule must cover it).")] = DEFAULTS.probe_prefix,
    sizes: Annotated[str, typer.Option(help="Preset name or comma-separated sizes (1MiB,64MiB,...).")] = DEFAULTS.sizes,
    trials: Annotated[int | None, typer.Option(help="Trials per size (default: the preset's, else 1).")] = None,
    timeout: Annotated[int, typer.Option(help="Seconds a probe may take from its upload's start; still PENDING then is STUCK.")] = DEFAULTS.timeout_seconds,
    target: Annotated[float, typer.Option(help="RPO target in seconds (exit 1 above it).")] = DEFAULTS.target_seconds,
    concurrency: Annotated[int, typer.Option(help="Probes in flight at once.")] = DEFAULTS.max_concurrency,
    resolution: Annotated[float, typer.Option(help="Polling floor in seconds (the interval's bound is max(this, 2 %)).")] = DEFAULTS.poll.floor_seconds,
    history: Annotated[bool, typer.Option(help="Skip early HEADs of large probes using the route's recent throughput.")] = True,
    table: Annotated[str | None, typer.Option(envvar="REPLMON_TABLE", help="Latency table (or --stack-name).")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", help="e.g. the lab's DynamoDB Local.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", help="AWS profile for AWS endpoints.")] = None,
    access_key: Annotated[str | None, typer.Option(envvar="REPLMON_ACCESS_KEY_ID", show_default=False,
                                                   help="S3-compatible endpoints' access key (prefer the environment variable).")] = None,
    secret_key: Annotated[str | None, typer.Option(envvar="REPLMON_SECRET_ACCESS_KEY", show_default=False,
                                                   help="Its secret (from REPLMON_SECRET_ACCESS_KEY: a flag shows in `ps`).")] = None,
    source_access_key: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ACCESS_KEY_ID", show_default=False, hidden=True)] = None,
    source_secret_key: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_SECRET_ACCESS_KEY", show_default=False, hidden=True)] = None,
    dest_access_key: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ACCESS_KEY_ID", show_default=False, hidden=True)] = None,
    dest_secret_key: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_SECRET_ACCESS_KEY", show_default=False, hidden=True)] = None,
    spool_dir: Annotated[Path, typer.Option(help="Where records wait if the store is down (replayed by the next run).")] = DEFAULT_SPOOL,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Probe one route now, through the same state machine and handlers that deploy to AWS.

    Credentials for S3-compatible endpoints come from REPLMON_ACCESS_KEY_ID and
    REPLMON_SECRET_ACCESS_KEY (or per endpoint: REPLMON_SOURCE_... and REPLMON_DEST_...); AWS
    endpoints use the standard chain or --profile.
    """
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.metrics import NullMetrics
    from replmon.adapters.s3 import PREFLIGHT_CONFIG, S3ObjectStore, S3Stores, s3_client
    from replmon.adapters.spool import DirectorySpool
    from replmon.local.execution import PreflightError, preflight, run_request
    from replmon.probe.plan import plan_output, worst_case_seconds
    from replmon.probe.request import Destination, Endpoint, load_request
    from replmon.probe.steps import Deps

    # ---- flags first: one line naming the flag, before anything is contacted
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    shared = keys_from(access_key, secret_key, "--access-key/--secret-key")
    src_keys = keys_from(source_access_key, source_secret_key, "REPLMON_SOURCE_ACCESS_KEY_ID/REPLMON_SOURCE_SECRET_ACCESS_KEY") or shared
    dst_keys = keys_from(dest_access_key, dest_secret_key, "REPLMON_DEST_ACCESS_KEY_ID/REPLMON_DEST_SECRET_ACCESS_KEY") or shared
    payload: dict[str, Any] = {
        "routes": [{"name": route, "prefix": prefix,
                    "source": {"bucket": source_bucket or "placeholder-bucket", "endpoint_url": source_endpoint, "region": source_region},
                    "destinations": [{"bucket": b, "endpoint_url": dest_endpoint, "region": dest_region or source_region}
                                     for b in (dest_bucket or ["placeholder-bucket"])]}],
        "sizes": sizes, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": concurrency,
        "poll": {"floor_seconds": resolution, "use_history": history},
    }
    if trials is not None:
        payload["trials"] = trials
    try:
        request = load_request(payload)
        plan_output(request, "flag-check", 0.0)  # a plan too large for one run is refused here
    except ConfigError as exc:
        fail(config_message(exc))
    aws_region_or_fail(source_region, source_endpoint, "--source-region", profile)
    if stack_name:
        outputs = stack_outputs(stack_name, source_region, profile)
        table = table or outputs.get("LatencyTableName")
        source_bucket = source_bucket or outputs.get("SourceBucket")
        dest_bucket = dest_bucket or ([outputs["DestinationBucket"]] if outputs.get("DestinationBucket") else None)
    if not source_bucket or not dest_bucket:
        fail("--source-bucket and --dest-bucket (or --stack-name): which buckets to probe?")
    if not table:
        if not dynamodb_endpoint:
            fail("--table or --stack-name: which latency table? (the deployed stack's output LatencyTableName)")
        table = "replmon-latency"  # the lab's
    payload["routes"][0]["source"]["bucket"] = source_bucket
    payload["routes"][0]["destinations"] = [{"bucket": b, "endpoint_url": dest_endpoint, "region": dest_region or source_region}
                                            for b in dest_bucket]
    by_url = {u: k for u, k in ((source_endpoint, src_keys), (dest_endpoint, dst_keys)) if u and k}
    stores = S3Stores(shared, by_url=by_url, profile=profile)
    deps = Deps(stores=stores, latency_store=DynamoLatencyStore(table, endpoint_url=dynamodb_endpoint, region=source_region, profile=profile),
                metrics=NullMetrics(), spool=DirectorySpool(spool_dir))

    def preflight_store(ep: Endpoint) -> S3ObjectStore:
        keys = by_url.get(ep.endpoint_url or "", shared)
        role = ep.role_arn if isinstance(ep, Destination) else None
        return S3ObjectStore(s3_client(ep.endpoint_url, ep.region, keys, role, PREFLIGHT_CONFIG, profile))

    try:
        preflight(payload, Deps(stores=preflight_store, latency_store=DynamoLatencyStore(
            table, endpoint_url=dynamodb_endpoint, region=source_region, profile=profile, config=PREFLIGHT_CONFIG), metrics=NullMetrics()))
    except PreflightError as exc:
        fail(str(exc), INFRASTRUCTURE)
    except ConfigError as exc:
        fail(config_message(exc))
    err.print(f"probing {len(request.sizes) * request.trials} probe(s); at most {worst_case_seconds(request):.0f} s "
              f"(timeout {timeout} s per probe, {concurrency} at a time, plus record and cleanup bounds)", highlight=False)
    from replmon.cli.labcmd import progress_bar

    with progress_bar() as bar:
        task = bar.add_task("probes", total=None)
        result = run_request(payload, deps, on_progress=lambda n, total: bar.update(task, completed=n, total=total))
    spooled = deps.spool.pending() if isinstance(deps.spool, DirectorySpool) else 0
    code = exit_code(result.records, result.planned, result.execution.status == "SUCCEEDED" and not result.failed_iterations)
    if spooled:
        err.print(f"{spooled} record(s) wait in {spool_dir}: the store was unavailable; the next run replays them", highlight=False)
    from replmon.core.stats import summarize

    if fmt is Format.table:
        from replmon.cli.labcmd import summary_rows

        emit(summary_rows(summarize(result.records)), fmt, f"run {result.run_id}")
    else:
        emit(record_rows(result.records), fmt, document={"run_id": result.run_id, "exit_code": code,
                                                         "records": [r.to_item() for r in result.records]})
    return code
