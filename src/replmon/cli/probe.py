"""`replmon probe` (one route, now, through the same state machine and handlers that deploy) and
`replmon presets` (the probe ladders a request's ``sizes`` may name)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replmon.cli.common import (
    INFRASTRUCTURE,
    aws_region_or_fail,
    check_output_dir,
    check_url,
    clock_skew_faults,
    config_message,
    default_spool_dir,
    fail,
    keys_from_env,
    require_extra,
    run_verdicts,
    stack_outputs,
)
from replmon.cli.exitcodes import Exit, combine
from replmon.cli.output import SUMMARY_KEYS
from replmon.cli.render import FORMAT_HELP, WIDE_HELP, Format, emit, err, footnotes, print_headline, progress_bar, summary_rows
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.names import check_bucket, check_endpoint_url, check_prefix, check_region, check_route_name

if TYPE_CHECKING:
    from replmon.local.execution import ProbeRun


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
    source_bucket: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_BUCKET", metavar="BUCKET",
                                                      help="Replication source bucket (or --stack-name).")] = None,
    dest_bucket: Annotated[list[str] | None, typer.Option(envvar="REPLMON_DEST_BUCKET", metavar="BUCKET",
                                                          help="Destination bucket (repeat for several; or --stack-name).")] = None,
    stack_name: Annotated[str | None, typer.Option(metavar="STACK", help="A deployed replmon stack: table and buckets from its outputs.")] = None,
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", metavar="URL",
                                                        help="An S3-compatible URL; omit for AWS.")] = None,
    dest_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ENDPOINT", metavar="URL",
                                                      help="An S3-compatible URL; omit for AWS.")] = None,
    source_region: Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="The source bucket's AWS Region.")] = None,
    dest_region: Annotated[str | None, typer.Option(metavar="REGION", help="The destination's AWS Region, if it differs.")] = None,
    route: Annotated[str, typer.Option(metavar="NAME", help="Route name the records are kept under.")] = DEFAULTS.route_name,
    prefix: Annotated[str, typer.Option(metavar="PREFIX", help="Probe key prefix (the replication rule must cover it).")] = DEFAULTS.probe_prefix,
    sizes: Annotated[str, typer.Option(metavar="SIZES", help="Preset name or comma-separated sizes (1MiB,64MiB,...).")] = DEFAULTS.sizes,
    trials: Annotated[int | None, typer.Option(metavar="N", help="Trials per size (default: the preset's, else 1).")] = None,
    timeout: Annotated[int, typer.Option(metavar="SECONDS", help="A probe still PENDING this long after its upload "
                                         "started is STUCK (the stack's ExpertSettings probe_timeout_seconds).")] = DEFAULTS.timeout_seconds,
    target: Annotated[float, typer.Option(metavar="SECONDS", help="Latency target: a probe over it is a breach, exit 1 "
                                          "(LatencyTargetSeconds).")] = DEFAULTS.target_seconds,
    concurrency: Annotated[int, typer.Option(metavar="N", help="Probes in flight at once (MaxConcurrency).")] = DEFAULTS.max_concurrency,
    resolution: Annotated[float, typer.Option(metavar="SECONDS", help="Polling floor: the interval's bound is max(this, "
                                              "2 % of the latency).")] = DEFAULTS.poll.floor_seconds,
    history: Annotated[bool, typer.Option(help="Skip early HEADs of large probes using the route's recent throughput.")] = True,
    table: Annotated[str | None, typer.Option(envvar="REPLMON_TABLE", metavar="NAME",
                                              help="Keep the records in this latency table (or --stack-name's); "
                                              "without one the run is ad hoc: results on stdout only.")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", metavar="URL",
                                                          help="A DynamoDB-compatible URL, e.g. the lab's; omit for AWS.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                                help="AWS profile for AWS endpoints (else the default credential chain).")] = None,
    spool_dir: Annotated[Path, typer.Option(metavar="DIR", help="Where records wait if the store is down (replayed by the "
                                            "next run).")] = DEFAULT_SPOOL,
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Probe one route now, through the same state machine and handlers that deploy.

    Credentials: AWS endpoints use the default AWS credential chain (environment variables,
    AWS_PROFILE or --profile, SSO, the instance or task role). S3-compatible endpoints read
    REPLMON_ACCESS_KEY_ID and REPLMON_SECRET_ACCESS_KEY (or per side REPLMON_SOURCE_... and
    REPLMON_DEST_...) from the environment: no secret is ever a flag. Without --table,
    --stack-name or --dynamodb-endpoint the run is ad hoc: nothing is kept, results go to
    stdout with the same exit codes.
    """
    require_extra("local", "probe")  # the real state machine runs under moto's interpreter
    from replmon import wiring
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.adapters.spool import DirectorySpool
    from replmon.cli.output import envelope, record_json, summary_json, within_counts
    from replmon.cli.runend import disk_faults, failure_faults, run_cause, spool_faults
    from replmon.core.keys import iso_ms
    from replmon.core.stats import summarize
    from replmon.local.execution import PreflightError, preflight, run_request
    from replmon.probe.plan import check_fits, worst_case_seconds
    from replmon.probe.request import load_settings
    from replmon.signals.verdict import with_run_cause

    # ---- flags first: one line naming the flag, before anything is contacted
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    shared = keys_from_env("REPLMON_")
    src_keys = keys_from_env("REPLMON_SOURCE_") or shared
    dst_keys = keys_from_env("REPLMON_DEST_") or shared
    flags = {"sizes": sizes, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": concurrency,
             "poll": {"floor_seconds": resolution, "use_history": history}, **({"trials": trials} if trials is not None else {})}
    problems = route_flag_problems(route, prefix, source_bucket, dest_bucket, source_endpoint, dest_endpoint, source_region, dest_region)
    try:
        settings = load_settings(flags)
    except ConfigError as exc:
        problems.append(config_message(exc))
    if problems:
        fail("; ".join(problems))
    if table or dynamodb_endpoint or stack_name:  # records are kept: the spool must take one if the store cannot
        check_output_dir(spool_dir, "--spool-dir")
    aws_region_or_fail(source_region, source_endpoint, "--source-region", profile)
    if stack_name:
        outputs = stack_outputs(stack_name, source_region, profile)
        table = table or outputs.get("LatencyTableName")
        source_bucket = source_bucket or outputs.get("SourceBucket")
        dest_bucket = dest_bucket or ([outputs["DestinationBucket"]] if outputs.get("DestinationBucket") else None)
    if not source_bucket or not dest_bucket:
        fail("--source-bucket and --dest-bucket (or --stack-name): which buckets to probe?")
    adhoc = not table and not dynamodb_endpoint
    if not table:
        table = "replmon-latency"  # the lab's (with --dynamodb-endpoint); unused when ad hoc
    try:
        request = settings.for_routes([{
            "name": route, "prefix": prefix, "source": {"bucket": source_bucket, "endpoint_url": source_endpoint, "region": source_region},
            "destinations": [{"bucket": b, "endpoint_url": dest_endpoint, "region": dest_region or source_region} for b in dest_bucket]}])
        check_fits(request)  # a plan too large for one run is refused here
    except ConfigError as exc:
        fail(config_message(exc))
    by_url = {u: k for u, k in ((source_endpoint, src_keys), (dest_endpoint, dst_keys)) if u and k}
    memory = MemoryLatencyTable() if adhoc else None
    deps = wiring.local_deps(table=table, dynamodb_endpoint=dynamodb_endpoint, region=source_region, profile=profile, keys=shared,
                             by_url=by_url, spool_dir=None if adhoc else spool_dir, store=memory)
    checks = wiring.preflight_deps(table=table, dynamodb_endpoint=dynamodb_endpoint, region=source_region, profile=profile,
                                   keys=shared, by_url=by_url, store=memory)
    try:
        preflight(request, checks)
    except PreflightError as exc:
        if "skew" in str(exc).lower():  # S3's RequestTimeTooSkewed: the clocks' difference is the reason (exit 3)
            clock_skew_faults(list(request.routes), checks.stores)
        fail(str(exc), INFRASTRUCTURE)
    # Every endpoint answered: the prober's clock against theirs (past S3's 15 minutes: refused, exit 3).
    skewed = clock_skew_faults(list(request.routes), checks.stores)
    if adhoc:
        err.print("ad hoc: no latency table (--table, --stack-name or --dynamodb-endpoint), so the records are printed, not kept",
                  highlight=False)
    err.print(f"probing {request.probes} probe(s); at most {worst_case_seconds(request):.0f} s "
              f"(timeout {timeout} s per probe, {concurrency} at a time, plus record and cleanup bounds)", highlight=False)
    with progress_bar() as bar:
        task = bar.add_task("probes", total=None)
        result = run_request(request, deps, on_progress=lambda n, total: bar.update(task, completed=n, total=total))
    for skip in result.skipped:  # never silent: another run is probing this route
        err.print(f"route {skip['route']} skipped: run {skip['held_by']} holds its lease until "
                  f"{iso_ms(skip['until'])} (one run per route at a time)", highlight=False)
    faults = skewed + run_end_faults(result, deps.spool, spool_dir)
    quarantined = spool_faults(result.execution, spool_dir)
    faults += quarantined + failure_faults(result.execution)
    if not adhoc and (result.account.could_not_record or result.execution.status != "SUCCEEDED"):
        faults += disk_faults([spool_dir])  # the spool's file system full: said, whichever step met it
    spooled = deps.spool.pending() if isinstance(deps.spool, DirectorySpool) else 0
    verdicts = run_verdicts(result.records, [route], result.planned,
                            result.execution.status == "SUCCEEDED" and not result.failed_iterations
                            and not result.skipped, target)
    verdicts = [with_run_cause(v, run_cause(faults)) for v in verdicts]
    code = combine(Exit.from_verdict(v.verdict) for v in verdicts)
    if code is not Exit.BREACH and (result.account.could_not_record or quarantined):
        code = Exit.NOT_RECORDED  # after a breach, before "not measured" (docs/SEMANTICS.md "Could not record")
    summaries = summarize(result.records)
    counts = within_counts(result.records, target)
    print_headline(verdicts, fmt)
    doc = envelope("probe", verdicts, code, target, run_id=result.run_id, duration_seconds=round(result.seconds, 3),
                   planned_probes=result.planned, kept_in=None if adhoc else table, spooled_records=spooled,
                   faults=faults, accounting=result.account.to_json(),
                   summaries=[summary_json(s, counts) for s in summaries],
                   records=[record_json(r, target) for r in result.records])
    if fmt is Format.table:
        rows, columns = summary_rows(summaries, counts, wide=wide)
        emit(rows, fmt, f"run {result.run_id}, route {route}: {len(result.records)} probes in {result.seconds:.0f} s",
             columns=columns, footnotes=footnotes(summaries))
    elif fmt is Format.csv:
        emit(doc["summaries"], fmt, columns=list(SUMMARY_KEYS))
    else:
        emit([], fmt, document=doc)
    for line in faults:  # one line per cause, after the table (docs/SEMANTICS.md "Could not record")
        err.print(line, highlight=False, soft_wrap=True)
    return code


def run_end_faults(result: ProbeRun, spool: object, spool_dir: Path) -> list[str]:
    """One line per cause: this run's lost and spooled records, the store at the end, and records
    of earlier runs still waiting in the spool."""
    from replmon.adapters.spool import DirectorySpool

    lines: list[str] = result.account.lines(str(spool_dir))
    waiting = spool.pending() - result.account.count("spooled") if isinstance(spool, DirectorySpool) else 0
    if waiting > 0:
        lines.append(f"{waiting} record(s) of earlier runs still wait in {spool_dir}: the next run with the store up replays them")
    return lines


def list_presets(fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table) -> int:
    """The named probe ladders (probe/ladders.json): sizes and trials a preset brings."""
    from replmon.core.sizes import format_size
    from replmon.probe import ladders

    rows = []
    for name in ladders.names():
        p = ladders.ladder(name)
        rows.append({"preset": name, "sizes": ",".join(format_size(s) for s in p.sizes), "trials": p.trials,
                     "description": p.description})
    doc = {"schema_version": 1, "command": "presets",
           "presets": [{"preset": n, "sizes": [format_size(s) for s in ladders.ladder(n).sizes], "size_bytes": list(ladders.ladder(n).sizes),
                        "trials": ladders.ladder(n).trials, "description": ladders.ladder(n).description} for n in ladders.names()]}
    emit(rows, fmt, "presets", columns=["preset", "sizes", "trials", "description"], document=doc)
    return 0
