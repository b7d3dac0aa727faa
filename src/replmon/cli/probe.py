"""`replmon probe` (one route, now, through the same state machine and handlers that deploy) and
`replmon presets` (the probe ladders a request's ``sizes`` may name)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from replmon.cli.common import (
    INFRASTRUCTURE,
    aws_region_or_fail,
    check_url,
    config_message,
    exit_code,
    fail,
    keys_from,
    stack_outputs,
)
from replmon.cli.render import FORMAT_HELP, Format, emit, err, progress_bar, record_rows, summary_rows
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.names import check_bucket, check_endpoint_url, check_prefix, check_region, check_route_name


def default_spool_dir() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "replmon" / "spool"


DEFAULT_SPOOL = default_spool_dir()


def route_flag_problems(route: str, prefix: str, source_bucket: str | None, dest_bucket: list[str] | None,
                        source_endpoint: str | None, dest_endpoint: str | None, source_region: str | None,
                        dest_region: str | None) -> list[str]:
    """The route's flags, each checked as the route model checks its field (core/names.py), before
    the buckets are known (--stack-name) or anything is contacted."""
    checks: list[tuple[str, Callable[[Any], object], str | None]] = [("--route", check_route_name, route), ("--prefix", check_prefix, prefix),
              ("--source-endpoint", check_endpoint_url, source_endpoint), ("--source-region", check_region, source_region),
              ("--dest-endpoint", check_endpoint_url, dest_endpoint), ("--dest-region", check_region, dest_region)]
    checks += [("--source-bucket", check_bucket, source_bucket)] if source_bucket else []
    checks += [("--dest-bucket", check_bucket, b) for b in dest_bucket or []]
    problems = []
    for flag, check, value in checks:
        try:
            check(value)
        except ValueError as exc:
            problems.append(f"{flag}: {exc}")
    return problems


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
    """Probe one route now, through the same state machine and handlers that deploy to AWS.

    Credentials for S3-compatible endpoints come from REPLMON_ACCESS_KEY_ID and
    REPLMON_SECRET_ACCESS_KEY (or per endpoint: REPLMON_SOURCE_... and REPLMON_DEST_...); AWS
    endpoints use the standard chain or --profile.
    """
    from replmon import wiring
    from replmon.adapters.spool import DirectorySpool
    from replmon.core.keys import iso_ms
    from replmon.core.stats import summarize
    from replmon.local.execution import PreflightError, preflight, run_request
    from replmon.probe.plan import check_fits, worst_case_seconds
    from replmon.probe.request import load_settings

    # ---- flags first: one line naming the flag, before anything is contacted
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    shared = keys_from(access_key, secret_key, "--access-key/--secret-key")
    src_keys = keys_from(source_access_key, source_secret_key, "REPLMON_SOURCE_ACCESS_KEY_ID/REPLMON_SOURCE_SECRET_ACCESS_KEY") or shared
    dst_keys = keys_from(dest_access_key, dest_secret_key, "REPLMON_DEST_ACCESS_KEY_ID/REPLMON_DEST_SECRET_ACCESS_KEY") or shared
    flags = {"sizes": sizes, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": concurrency,
             "poll": {"floor_seconds": resolution, "use_history": history}, **({"trials": trials} if trials is not None else {})}
    problems = route_flag_problems(route, prefix, source_bucket, dest_bucket, source_endpoint, dest_endpoint, source_region, dest_region)
    try:
        settings = load_settings(flags)
    except ConfigError as exc:
        problems.append(config_message(exc))
    if problems:
        fail("; ".join(problems))
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
    try:
        request = settings.for_routes([{
            "name": route, "prefix": prefix, "source": {"bucket": source_bucket, "endpoint_url": source_endpoint, "region": source_region},
            "destinations": [{"bucket": b, "endpoint_url": dest_endpoint, "region": dest_region or source_region} for b in dest_bucket]}])
        check_fits(request)  # a plan too large for one run is refused here
    except ConfigError as exc:
        fail(config_message(exc))
    by_url = {u: k for u, k in ((source_endpoint, src_keys), (dest_endpoint, dst_keys)) if u and k}
    deps = wiring.local_deps(table=table, dynamodb_endpoint=dynamodb_endpoint, region=source_region, profile=profile, keys=shared,
                             by_url=by_url, spool_dir=spool_dir)
    try:
        preflight(request, wiring.preflight_deps(table=table, dynamodb_endpoint=dynamodb_endpoint, region=source_region, profile=profile,
                                                 keys=shared, by_url=by_url))
    except PreflightError as exc:
        fail(str(exc), INFRASTRUCTURE)
    err.print(f"probing {request.probes} probe(s); at most {worst_case_seconds(request):.0f} s "
              f"(timeout {timeout} s per probe, {concurrency} at a time, plus record and cleanup bounds)", highlight=False)
    with progress_bar() as bar:
        task = bar.add_task("probes", total=None)
        result = run_request(request, deps, on_progress=lambda n, total: bar.update(task, completed=n, total=total))
    for skip in result.skipped:  # never silent: another run is probing this route
        err.print(f"route {skip['route']} skipped: run {skip['held_by']} holds its lease until "
                  f"{iso_ms(skip['until'])} (one run per route at a time)", highlight=False)
    spooled = deps.spool.pending() if isinstance(deps.spool, DirectorySpool) else 0
    code = exit_code(result.records, result.planned, result.execution.status == "SUCCEEDED" and not result.failed_iterations
                     and not result.skipped)
    if spooled:
        err.print(f"{spooled} record(s) wait in {spool_dir}: the store was unavailable; the next run replays them", highlight=False)
    if fmt is Format.table:
        emit(summary_rows(summarize(result.records)), fmt, f"run {result.run_id}")
    else:
        emit(record_rows(result.records), fmt, document={"run_id": result.run_id, "exit_code": code,
                                                         "records": [r.to_item() for r in result.records]})
    return code


def list_presets(fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table) -> int:
    """The named probe ladders (probe/ladders.json): sizes and trials a preset brings."""
    from replmon.core.sizes import format_size
    from replmon.probe import ladders

    rows = []
    for name in ladders.names():
        p = ladders.ladder(name)
        rows.append({"preset": name, "sizes": ",".join(format_size(s) for s in p.sizes), "trials": p.trials,
                     "description": p.description})
    emit(rows, fmt, "presets", columns=["preset", "sizes", "trials", "description"])
    return 0
