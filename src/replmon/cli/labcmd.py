"""`replmon lab ...`: the local lab (run, bench, bench-mounts, chaos, fio), its own command group."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replmon.cli.common import (
    INFRASTRUCTURE,
    OK,
    USAGE,
    check_output_dir,
    check_output_file,
    config_message,
    fail,
    require_extra,
    run_verdicts,
)
from replmon.cli.exitcodes import Exit, combine, help_for
from replmon.cli.render import (
    FORMAT_HELP,
    WIDE_HELP,
    Format,
    emit,
    err,
    footnotes,
    out,
    print_headline,
    progress_bar,
    summary_rows,
)
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError

if TYPE_CHECKING:
    from replmon.core.record import ProbeRecord

lab_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                      help="The local lab: two MinIO servers with real replication, DynamoDB Local, Toxiproxy.")

@lab_app.callback()
def _needs_the_lab_extra(ctx: typer.Context) -> None:
    """Every lab command but ``down`` starts servers or runs the state machine: without replmon[lab]
    say so (exit 2) before any server starts."""
    if ctx.invoked_subcommand not in (None, "down"):
        require_extra("lab", f"lab {ctx.invoked_subcommand}")


#: MinIO refuses a replication bandwidth limit below this (the remote target's bandwidthlimit, lab/minio_admin.py).
MINIO_MIN_BANDWIDTH = 100 * 2**20


def check_bandwidth(value: str) -> str:
    from replmon.core.sizes import SizeError, format_size, parse_size

    try:
        n = parse_size(value)
    except SizeError as exc:
        fail(f"--bandwidth: {exc}")
    if n < MINIO_MIN_BANDWIDTH:
        fail(f"--bandwidth: {value} is below MinIO's minimum replication limit of 100MiB; use 100MiB or more")
    return format_size(n)


LAB_DIR_HELP = "The lab's directory (servers' data, logs, charts, records); the lab's alone."


def fleet_size(value: str) -> int:
    """``--routes N`` of the lab: one count (``replmon cost --routes`` takes several), 1 to 99."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= 99:
        fail(f"--routes {value!r}: the lab fleet's number of routes, 1 to 99 (e.g. --routes 20)")
    return n


@lab_app.command("run", epilog=help_for("lab run"))
def lab_run(
    sizes: Annotated[str, typer.Option(metavar="SIZES", help="Preset name or comma-separated sizes (1MiB,64MiB,...).")] = "lab-ladder",
    trials: Annotated[int | None, typer.Option(metavar="N", help="Trials per size (default: the preset's).")] = None,
    target: Annotated[float, typer.Option(metavar="SECONDS", help="Latency target the probes are judged against "
                                          "(LatencyTargetSeconds).")] = DEFAULTS.target_seconds,
    bandwidth: Annotated[str, typer.Option(metavar="RATE", help="MinIO replication bandwidth limit per second (100MiB is "
                                           "MinIO's minimum).")] = "100MiB",
    resolution: Annotated[float, typer.Option(metavar="SECONDS", help="Polling floor (AWS default 1.0; the lab can afford "
                                              "finer).")] = 0.1,
    timeout: Annotated[int, typer.Option(metavar="SECONDS", help="A probe still PENDING this long after its upload started "
                                         "is STUCK.")] = 600,
    history: Annotated[bool, typer.Option(help="Let earlier runs' throughput skip early HEADs (off: every run polls from the start).")] = False,
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data"),
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
    routes: Annotated[str | None, typer.Option("--routes", metavar="N", help="Instead: a lab fleet of N (1-99) replicated bucket "
                                               "pairs (and buckets the inventory must refuse), found by the inventory and probed in "
                                               "one run (--sizes defaults to 1MiB there); the verdict per route.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Run a probe ladder in the lab: the verdict, the table, a chart.

    Starts the lab, runs the ladder through the real state machine and handlers, prints the
    answer first (RPO, target, probes within it, what is failing), then the table, and draws
    latency vs size with the target line; records and chart are kept per run under DIR/runs.
    """
    from replmon.cli.output import SUMMARY_KEYS, envelope, record_json, summary_json, within_counts
    from replmon.cli.runend import (
        dead_events,
        disk_faults,
        failure_faults,
        kept_by_route,
        leftover_check,
        record_fault,
        run_cause,
        spool_faults,
        write_run_files,
    )
    from replmon.core.stats import summarize
    from replmon.lab.lab import Lab, planned_route
    from replmon.lab.servers import LabError
    from replmon.local.execution import RunInterrupted, run_request, salvage_summary
    from replmon.probe.plan import check_fits
    from replmon.probe.request import load_settings
    from replmon.signals.verdict import with_run_cause

    bandwidth = check_bandwidth(bandwidth)
    if routes is not None:
        if history or wide:
            fail("--history/--wide: not with --routes (the fleet run polls from the start and prints one row a route)")
        return _run_fleet(fleet_size(routes), "1MiB" if sizes == "lab-ladder" else sizes, trials, target, bandwidth, timeout, resolution, lab_dir, fmt)
    flags = {"sizes": sizes, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": 1,
             "poll": {"floor_seconds": resolution, "use_history": history}, **({"trials": trials} if trials is not None else {})}
    try:  # bad flags fail before any server starts
        settings = load_settings(flags)
        check_fits(settings.for_routes([planned_route("lab")]))
    except ConfigError as exc:
        fail(config_message(exc))
    stopped: RunInterrupted | None = None
    quarantined: list[str] = []
    try:
        with Lab(lab_dir, bandwidth=bandwidth) as lab:
            err.print(f"lab up: source {lab.servers['source'].url}, destination {lab.servers['destination'].url} "
                      f"(replication limit {bandwidth}/s), DynamoDB Local {lab.servers['dynamodb'].url}", highlight=False)
            try:
                with progress_bar() as bar:
                    task = bar.add_task("probes", total=None)
                    result = run_request(settings.for_routes([lab.route()]), lab.deps(),
                                         on_progress=lambda n, total: bar.update(task, completed=n, total=total), function_deps=lab.function_deps())
                records, run_id, seconds = result.records, result.run_id, result.seconds
                faults = result.account.lines(str(lab_dir / "spool"), store=lab.servers["dynamodb"].url)
                quarantined = spool_faults(result.execution, lab_dir / "spool")
                faults += quarantined + failure_faults(result.execution)
            except RunInterrupted as exc:  # the started probes are recorded and cleaned: end the run as any other
                stopped, run_id, seconds = exc, exc.salvage.run_id, 0.0
                records, faults = interrupted_records(lab, run_id)
            left, left_faults = leftover_check(lab)
            faults += left_faults + dead_events(lab)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    summaries = summarize(records)
    counts = within_counts(records, target)
    data, chart, file_faults = write_run_files(records, lab_dir, run_id, f"replmon lab: MinIO -> MinIO at {bandwidth}/s, run {run_id}",
                                               target_seconds=target)
    faults += file_faults
    leftover = sum(len(v) for v in (left or {}).values())
    execution_ok = stopped is None and result.execution.status == "SUCCEEDED" and not result.failed_iterations and not result.skipped
    faults += disk_faults([lab_dir]) if faults or not execution_ok else []
    verdicts = run_verdicts(records, ["lab"], result.planned if stopped is None else len(records), execution_ok, target)
    verdicts = [with_run_cause(v, run_cause(faults)) for v in verdicts]
    if stopped is None:  # records the store did not take, said beside the verdict (as lab run --routes does)
        kept = kept_by_route(records, result.account)
        for v in verdicts:
            v.extra["recorded"], v.extra["record_fault"] = kept.get(v.route, {}), record_fault(kept.get(v.route, {}))
    if stopped is not None:
        code: int = 128 + {"SIGINT": 2, "SIGTERM": 15}.get(stopped.salvage.signame, 0)
    else:
        code = combine(Exit.from_verdict(v.verdict) for v in verdicts)
        if code is not Exit.BREACH and (result.account.could_not_record or data is None or quarantined):
            code = Exit.NOT_RECORDED  # after a breach, before "not measured" (docs/SEMANTICS.md "Could not record")
        elif leftover or left is None:
            code = combine([Exit(code), INFRASTRUCTURE])
    doc = envelope("lab run", verdicts, code, target, run_id=run_id, duration_seconds=round(seconds, 3),
                   planned_probes=result.planned if stopped is None else None, summaries=[summary_json(s, counts) for s in summaries],
                   records=[record_json(r, target) for r in records], left_behind=left, chart_files=[str(chart)] if chart else [],
                   records_file=str(data) if data else None, faults=faults,
                   accounting=result.account.to_json() if stopped is None else None)
    print_headline(verdicts, fmt)
    if fmt is Format.json:
        emit([], fmt, document=doc)
    elif fmt is Format.csv:
        emit(doc["summaries"], fmt, columns=list(SUMMARY_KEYS))
    else:
        rows, columns = summary_rows(summaries, counts, wide=wide)
        emit(rows, fmt, f"run {run_id}: {len(records)} probes in {seconds:.0f} s (route lab)", columns=columns,
             footnotes=footnotes(summaries))
    notes = ([f"chart: {chart}"] if chart else []) + \
        ([f"records: {data} (and DynamoDB Local under {lab_dir / 'dynamodb'}, kept between runs)"] if data else []) + \
        ([f"left behind: {leftover} probe objects/versions/uploads" + ("" if not leftover else f" {left}")] if left is not None else [])
    (out if fmt is Format.table else err).print("\n".join(notes), highlight=False, markup=False)
    if stopped is not None:
        for line in salvage_summary(stopped.salvage):
            err.print(line, highlight=False)
    for line in faults:  # one line per cause (docs/SEMANTICS.md "Could not record")
        err.print(line, highlight=False, soft_wrap=True)
    return code


def _run_fleet(n: int, sizes: str, trials: int | None, target: float, bandwidth: str, timeout: int, resolution: float, lab_dir: Path,
               fmt: Format) -> int:
    """``lab run --routes N``: the lab fleet's routes, as the inventory found them, in one ad-hoc run of
    the real state machine (the routes in its input: the registry planner is not exercised here), every
    function as the member account's prober (lab/fleetlab.py)."""
    from replmon.cli.output import envelope, record_json, summary_json, within_counts
    from replmon.cli.runend import disk_faults, failure_faults, kept_by_route, record_fault, run_cause, spool_faults, write_run_files
    from replmon.core.stats import summarize
    from replmon.lab.fleetlab import fleet_leftovers, setup_fleet
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.local.aslrun import FUNCTIONS
    from replmon.local.execution import RunInterrupted, run_request, salvage_summary
    from replmon.probe.request import load_settings
    from replmon.signals.verdict import with_run_cause

    flags = {"sizes": sizes, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": 4,
             "poll": {"floor_seconds": resolution}, **({"trials": trials} if trials is not None else {})}
    try:
        settings = load_settings(flags)
    except ConfigError as exc:
        fail(config_message(exc))
    try:
        with Lab(lab_dir, bandwidth=bandwidth) as lab:
            fleet = setup_fleet(lab, n)
            store_url = lab.servers["dynamodb"].url  # named in the line of records the store did not take
            err.print(f"lab fleet up: {len(fleet.routes)} routes the inventory found probeable, "
                      f"{len(fleet.survey) - len(fleet.routes)} buckets it did not", highlight=False)
            deps = fleet.deps()
            try:
                with progress_bar() as bar:
                    task = bar.add_task("probes", total=None)
                    result = run_request(settings.for_routes(fleet.routes), deps,
                                         on_progress=lambda k, total: bar.update(task, completed=k, total=total),
                                         function_deps=dict.fromkeys(FUNCTIONS, deps))
            except RunInterrupted as exc:  # the started probes are recorded and cleaned (as lab run's): say so, exit 130/143
                for line in salvage_summary(exc.salvage):
                    err.print(line, highlight=False)
                return 128 + {"SIGINT": 2, "SIGTERM": 15}.get(exc.salvage.signame, 0)
            left = fleet_leftovers(fleet)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    records = result.records
    names = [r["name"] for r in fleet.routes]
    execution_ok = result.execution.status == "SUCCEEDED" and not result.failed_iterations and not result.skipped
    verdicts = run_verdicts(records, names, result.planned, execution_ok, target)
    leftover = sum(len(v) for v in left.values())
    code = combine(Exit.from_verdict(v.verdict) for v in verdicts)
    quarantined = spool_faults(result.execution, lab_dir / "spool")
    if result.account.could_not_record or quarantined:
        code = combine([Exit(code), Exit.NOT_RECORDED])
    if leftover:
        code = combine([Exit(code), INFRASTRUCTURE])
    unprobed = [s for s in fleet.survey if s["reason"] != "OK"]
    data, chart, file_faults = write_run_files(records, lab_dir, result.run_id, f"replmon lab fleet: {len(names)} routes, run {result.run_id}",
                                               target_seconds=target)
    if data is None:
        code = combine([Exit(code), Exit.NOT_RECORDED])
    counts = within_counts(records, target)
    summaries = summarize(records)
    faults = (result.account.lines(str(lab_dir / "spool"), store=store_url) + quarantined
              + failure_faults(result.execution) + file_faults)
    faults += disk_faults([lab_dir]) if faults or not execution_ok else []
    kept = kept_by_route(records, result.account)
    verdicts = [with_run_cause(v, run_cause(faults)) for v in verdicts]
    for v in verdicts:  # where each route's records are, beside its verdict: a route measured OK whose records were spooled says so
        v.extra["recorded"] = kept.get(v.route, {})
        v.extra["record_fault"] = record_fault(kept.get(v.route, {}))
    doc = envelope("lab run", verdicts, code, target, run_id=result.run_id, duration_seconds=round(result.seconds, 3),
                   planned_probes=result.planned, summaries=[summary_json(x, counts) for x in summaries],
                   records=[record_json(r, target) for r in records], survey=fleet.survey, left_behind=left,
                   chart_files=[str(chart)] if chart else [], records_file=str(data) if data else None,
                   faults=faults, accounting=result.account.to_json())
    print_headline(verdicts, fmt)
    rows = []
    for v in verdicts:
        s = [x for x in summaries if x.route == v.route]
        p50, top = [max((val for val in vals if val is not None), default=None) for vals in ([x.p50 for x in s], [x.max for x in s])]
        rows.append({"route": v.route, "verdict": str(v.verdict) + (", NOT RECORDED" if v.extra.get("record_fault") else ""), "probes": v.probes, "within target": v.within_target,
                     "p50 s": None if p50 is None else round(p50, 3), "max s": None if top is None else round(top, 3),
                     "recorded": ", ".join(f"{n} {how}" for how, n in sorted(kept.get(v.route, {}).items())) or "-"})
    if fmt is Format.json:
        emit([], fmt, document=doc)
    else:
        if fmt is Format.table:
            emit(unprobed, fmt, "buckets the inventory did not make routes of (and why)", columns=["bucket", "mode", "reason", "detail"])
        emit(rows, fmt, f"run {result.run_id}: {len(records)} probes on {len(names)} routes in {result.seconds:.0f} s "
             f"(sizes {sizes}, at most 4 at once)", columns=["route", "verdict", "probes", "within target", "p50 s", "max s", "recorded"])
        (out if fmt is Format.table else err).print(f"left behind: {leftover} probe objects/versions/uploads", highlight=False)
    for line in faults:  # one line per cause on stderr, whatever the format (docs/SEMANTICS.md "Could not record")
        err.print(line, highlight=False, soft_wrap=True)
    return code


def interrupted_records(lab: Any, run_id: str) -> tuple[list[ProbeRecord], list[str]]:
    """An interrupted run's records as the store holds them (INTERRUPTED, or as they settled)."""
    from replmon.adapters.explain import explain

    try:
        recs = [r for r in lab.store().query("lab", 0, 4e9) if r.run_id == run_id]
    except Exception as exc:
        return [], [f"store unreachable: the interrupted run's records could not be read back ({explain(exc)})"]
    return sorted(recs, key=lambda r: (r.size_bytes, r.trial)), []


@lab_app.command("up", epilog=help_for("lab up"))
def lab_up(
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data"),
    bandwidth: Annotated[str, typer.Option(metavar="RATE", help="MinIO replication bandwidth limit per second.")] = "100MiB",
    fmt: Annotated[Format, typer.Option("--format", help="table: shell exports on stdout, the rest on stderr; json: one document")]
    = Format.table,
) -> int:
    """Start the lab and keep it running; print the shell exports.

    Use it as  eval "$(replmon lab up)"  then  replmon probe  and  replmon report --route lab
    work against the lab without further flags (the secret stays in DIR/lab.secret, mode 0600).
    DynamoDB Local's data is kept between runs, so earlier `lab run` records can be reported.
    `replmon lab down` stops exactly what this started.
    """
    from replmon.lab import session
    from replmon.lab.servers import LabError

    bandwidth = check_bandwidth(bandwidth)
    was = session.read(lab_dir)
    try:
        s = session.up(lab_dir, bandwidth)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    info = session.describe(s)
    if fmt is Format.json:
        emit([], fmt, document={**info, "exports": s.exports()})
        return OK
    e = s.endpoints
    err.print(("lab already up" if was is not None and was.pid == s.pid else "lab up") + f" in {lab_dir} (supervisor pid {s.pid})",
              highlight=False)
    err.print(f"  source       {e['source']}  bucket {info['source_bucket']} (replicates at {s.bandwidth}/s)\n"
              f"  destination  {e['destination']}  bucket {info['dest_bucket']}\n"
              f"  DynamoDB     {e['dynamodb']}  table {info['table']} (kept between runs)\n"
              f"next: eval \"$(replmon lab up --dir {lab_dir})\"; replmon probe --route adhoc --sizes 1MiB; "
              f"replmon report --route lab --route adhoc; replmon lab preflight --dir {lab_dir}; replmon lab down --dir {lab_dir}",
              highlight=False, markup=False)
    sys.stdout.write("\n".join(s.exports()) + "\n")
    return OK


@lab_app.command("down", epilog=help_for("lab down"))
def lab_down(
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data"),
) -> int:
    """Stop what `replmon lab up` started; print the shell unsets.

    Stops exactly the supervisor `lab up` recorded in DIR/lab-up.json (and, if it was killed,
    the servers its pidfile lists); the lab's data stays in DIR. Use it as
    eval "$(replmon lab down)".
    """
    from replmon.lab import session

    if lab_dir.exists() and not lab_dir.is_dir():
        fail(f"--dir {lab_dir} is a file; give the directory `replmon lab up` used")
    damaged = session.damaged(lab_dir)
    stopped = session.down(lab_dir)
    holder = session.holder(lab_dir) if damaged else None
    if holder is not None:  # a lab still runs there, and the file that named it is unreadable
        fail(f"--dir {lab_dir}: {', '.join(str(p) for p in damaged)} damaged, and a replmon lab (pid {holder}) still holds the directory; "
             f"if `replmon lab up` started it, stop it with: kill {holder}", INFRASTRUCTURE)
    note = f" ({', '.join(p.name for p in damaged)} damaged, naming no process: ignored)" if damaged else ""
    err.print(f"lab down in {lab_dir}: stopped {', '.join(stopped)}{note}" if stopped else f"no lab was up in {lab_dir}{note}",
              highlight=False, soft_wrap=True)  # one line, whatever the path's length (scripts grep it)
    sys.stdout.write("".join(f"unset {name}\n" for name in session.EXPORTED))
    return OK


@lab_app.command("preflight", epilog=help_for("lab preflight"))
def lab_preflight(
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data"),
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """`replmon preflight` on the route of the lab `replmon lab up` keeps.

    Read-only, against the lab's MinIO: versioning on both sides, the rule that covers the probe
    prefix, RTC and metrics on it, the source's replication events to the lab's webhook, default
    encryption. The replication role is not applicable (MinIO has no IAM: it replicates with its
    remote target's credentials). Prints the equivalent preflight command first.
    """

    from replmon.cli.preflight import preflight
    from replmon.lab import session
    from replmon.lab.lab import EVENTS_TARGET, PREFIX, SOURCE_BUCKET

    s = session.read(lab_dir)
    if s is None or not s.alive:
        fail(f"--dir {lab_dir}: no lab is up there; start one with: replmon lab up --dir {lab_dir}")
    try:
        secret = (lab_dir / session.SECRET).read_bytes().decode("ascii").strip()
    except OSError as exc:
        fail(f"--dir {lab_dir}: cannot read the lab's secret ({exc.strerror}); restart it with replmon lab down / lab up", INFRASTRUCTURE)
    except UnicodeDecodeError:
        secret = ""
    if not secret or not secret.isprintable() or any(c.isspace() for c in secret):  # a NUL cannot be an environment value
        fail(f"--dir {lab_dir}: the lab's secret ({lab_dir / session.SECRET}) is damaged; restart it with replmon lab down / lab up",
             INFRASTRUCTURE)
    # the lab's credentials, as `eval "$(replmon lab up)"` would export them (never on the command line)
    os.environ.update({"REPLMON_ACCESS_KEY_ID": s.endpoints["access_key_id"], "REPLMON_SECRET_ACCESS_KEY": secret})
    src, dst = s.endpoints["source"], s.endpoints["destination"]
    err.print(f"replmon preflight --source-bucket {SOURCE_BUCKET} --prefix {PREFIX} --events-target {EVENTS_TARGET} "
              f"--source-endpoint {src} --dest-endpoint {dst}   (with the lab's exports)", highlight=False, markup=False, soft_wrap=True)
    return preflight(source_bucket=SOURCE_BUCKET, dest_bucket=None, prefix=PREFIX, events_target=EVENTS_TARGET, source_region=None,
                     dest_region=None, source_endpoint=src, dest_endpoint=dst, profile=None, fmt=fmt)


@lab_app.command("serve", hidden=True)
def lab_serve(
    lab_dir: Annotated[Path, typer.Option("--dir")] = Path("lab-data"),
    bandwidth: Annotated[str, typer.Option()] = "100MiB",
) -> int:
    """The supervisor `lab up` starts (holds the lab until SIGTERM)."""
    from replmon.lab import session
    from replmon.lab.servers import LabError

    try:
        session.serve(lab_dir, check_bandwidth(bandwidth))
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    return OK


@lab_app.command("bench")
def lab_bench(
    trials: Annotated[int, typer.Option(min=1, max=20, help="Probes per size and policy.")] = 3,
    sizes: Annotated[str, typer.Option(help="Probe sizes for P1/P2/P4 (comma-separated).")] = "1MiB,16MiB,128MiB,1GiB",
    compose_size: Annotated[str, typer.Option(help="P3: the size of the probe made by composition vs upload_file.")] = "4GiB",
    lab_dir: Annotated[Path, typer.Option("--dir", help="The bench lab's directory.")] = Path("lab-data/bench"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH.md"),
) -> int:
    """P1 HEADs per probe at equal error bound, P2 accuracy as containment in [lo, hi], P3 composition
    speed, P4 record delay, P5 cold start and layer size; writes docs/BENCH.md."""
    from replmon.core.sizes import SizeError, parse_size
    from replmon.lab.bench import run_bench
    from replmon.probe.request import load_settings

    try:
        load_settings({"sizes": sizes, "trials": trials})
    except ConfigError as exc:
        fail(config_message(exc))
    try:
        parse_size(compose_size)
    except SizeError as exc:
        fail(f"--compose-size: {exc}")
    check_output_file(output, "--output")
    from replmon.lab.servers import LabError

    try:
        run_bench(out, trials=trials, sizes=sizes, compose_size=compose_size, lab_dir=lab_dir, output=output)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    return 0


@lab_app.command("bench-ingest")
def lab_bench_ingest(
    events: Annotated[int, typer.Option(min=10, max=1_000_000, help="Events sent through IngestEvents (batches of 100, the mapping's BatchSize).")] = 10_000,
    hour_events: Annotated[int, typer.Option(min=10, max=1_000_000, help="Events in the hour the collector then reads.")] = 100_000,
    concurrency: Annotated[int, typer.Option(min=2, max=1000, help="Concurrent IngestEvents (EventsMaxConcurrency).")] = 5,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The bench's directory (DynamoDB Local's data).")] = Path("lab-data/bench-ingest"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-INGEST.md"),
) -> int:
    """P6 event ingestion: events/s into DynamoDB Local through the real handler, the
    modelled first throttle per partition key, the collector's time with a large hour."""
    from replmon.lab.bench import run_ingest_bench
    from replmon.lab.servers import LabError

    check_output_file(output, "--output")
    if hour_events < events:
        fail("--hour-events: at least --events (the ingested events are part of the hour)")
    try:
        run_ingest_bench(out, lab_dir, output, ingest_events=events, hour_events=hour_events, concurrency=concurrency)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    return 0


@lab_app.command("bench-stall")
def lab_bench_stall(
    reps: Annotated[int, typer.Option(min=1, max=20, help="Faults: each fault -> STALLED and ALARM, then heal -> HEALTHY and OK.")] = 5,
    healthy_periods: Annotated[int, typer.Option(min=6, max=2000, help="Heartbeat periods of a healthy route counted for false "
                                                 "alarms (60 = as many heartbeats as an hour at the defaults).")] = 60,
    fault: Annotated[str, typer.Option(help="hang, reset, latency or bandwidth (lab/faults.py).")] = "hang",
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data/bench-stall"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-STALL.md"),
    expectations: Annotated[str, typer.Option(metavar="E,E,...", help="Learned expectations E (s) at which detection is measured "
                                              "through the deployed stack's wiring, time stepped (lab/stalldetect.py); '' for none.")] = "20,60,180",
    detection_reps: Annotated[int, typer.Option(min=1, max=20, help="Faults at each E.")] = 3,
    skip_lab: Annotated[bool, typer.Option("--skip-lab", help="Keep the lab section of the previous run (docs/bench/bench-stall.json, "
                                           "with its own date) and measure only the detection at each E.")] = False,
) -> int:
    """Stall detection: time from a fault on the replication path to the route STALLED and
    to the RouteStalled alarm, from healing to HEALTHY and OK, through the real Heartbeat function;
    false alarms over a healthy run and 30 simulated days; the defaults' figure by simulation; and
    detection at each learned E through the deployed stack (its Heartbeat, alarm and page rule)."""
    import json
    import time as _time

    from replmon.core.cadence import ProbeClasses
    from replmon.core.defaults import DEFAULTS
    from replmon.cost.fleet import HEARTBEAT_PREFIX, fleet_estimate, stall_metric_and_alarm
    from replmon.lab.benchreport import SCHEMA, facts, finish, json_path_for, load_average
    from replmon.lab.faults import FAULTS
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.lab.stallbench import run_stall_bench

    if fault not in FAULTS:
        fail(f"--fault {fault!r}: use one of {', '.join(FAULTS)}")
    try:
        es = [float(x) for x in expectations.split(",") if x.strip()]
    except ValueError:
        fail(f"--expectations {expectations!r}: give seconds separated by commas, e.g. 20,60,180")
    if any(not 20 <= e <= 450 for e in es):
        fail(f"--expectations {expectations!r}: each E must lie in [20, 450] s (the default floor, half the default 900 s target)")
    check_output_file(output, "--output")
    started = _time.time()
    command = f"replmon lab bench-stall --reps {reps} --healthy-periods {healthy_periods} --fault {fault}"
    detect_command = f"replmon lab bench-stall --expectations {','.join(f'{e:g}' for e in es)} --detection-reps {detection_reps}"
    json_path = json_path_for(output, "bench-stall")
    if skip_lab:
        try:
            doc: dict[str, Any] = json.loads(json_path.read_text())
        except (OSError, ValueError) as exc:
            fail(f"--skip-lab: no previous run to keep ({json_path}: {exc}); run without --skip-lab first")
    else:
        doc = {"schema": SCHEMA, "report": "bench-stall", "facts": facts(command)}
        try:
            with Lab(lab_dir) as lab:
                doc["stall"] = run_stall_bench(lab, reps=reps, healthy_periods=healthy_periods, fault=fault,
                                               progress=lambda m: err.print(m, highlight=False))
        except LabError as exc:
            fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    if es:
        from replmon.lab.stalldetect import measure_detection

        detect_facts = facts(detect_command)
        detect_began = _time.time()
        doc["detection"] = {"facts": detect_facts, **measure_detection(es, detection_reps, progress=lambda m: err.print(m, highlight=False))}
        detect_facts["load_average_end"] = load_average()
        detect_facts["took_s"] = round(_time.time() - detect_began)
    est = fleet_estimate(100, ProbeClasses.parse(DEFAULTS.probe_classes))
    own = sum(x.dollars for x in est.per_route_lines if x.item.startswith(HEARTBEAT_PREFIX))
    if not skip_lab:  # a kept lab section keeps the cost of its day
        doc["stall"]["cost"] = {"heartbeat_seconds": DEFAULTS.heartbeat_seconds, "heartbeats_usd": round(own, 3),
                                "with_metric_and_alarm_usd": round(own + stall_metric_and_alarm(est), 3),
                                "probe_schedule_usd": round(est.per_route - own - stall_metric_and_alarm(est), 3),
                                "probe_classes": DEFAULTS.probe_classes, "as_of": est.as_of, "modelled": True}
    finish(doc, started, json_path, output, close_facts=not skip_lab)  # a kept lab section keeps its own facts
    err.print(f"wrote {output}", highlight=False)
    return 0


@lab_app.command("bench-fleet")
def lab_bench_fleet(
    routes: Annotated[str, typer.Option("--routes", metavar="N", help="The lab fleet's size (1-99).")] = "20",
    reps: Annotated[int, typer.Option(min=0, max=20, help="Faults, each on a route drawn at random (0: none; the report keeps "
                                      "the last run's detection section).")] = 3,
    fault: Annotated[str, typer.Option(help="hang, reset, latency or bandwidth (lab/faults.py).")] = "hang",
    heartbeat_routes: Annotated[int, typer.Option("--heartbeat-routes", min=0, max=1000, help="Also time the Heartbeat handler over "
                                                  "this many routes in one group (0: not measured).")] = 0,
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data/bench-fleet"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-FLEET.md"),
) -> int:
    """Detection in the lab fleet: per fault on one route, the time to its contributor of
    the fleet alarm in ALARM, and every other contributor that went into ALARM (none expected)."""
    from replmon.lab.faults import FAULTS
    from replmon.lab.fleetlab import run_fleet_bench
    from replmon.lab.heartbeatscale import run_heartbeat_scale
    from replmon.lab.lab import Lab

    n = fleet_size(routes)
    if fault not in FAULTS:
        fail(f"--fault {fault!r}: use one of {', '.join(FAULTS)}")
    say = lambda m: err.print(m, highlight=False)  # noqa: E731

    def measure(lab: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if heartbeat_routes:
            out["heartbeat_scale"] = run_heartbeat_scale(lab, routes=heartbeat_routes, progress=say)
        if reps:
            out["fleet"] = run_fleet_bench(lab, routes=n, reps=reps, fault=fault, progress=say)
        elif (kept := _kept_section(output, "bench-fleet", "fleet")) is not None:
            out |= kept  # detection not run this time: the last run's section, with its own facts
        return out

    command = f"replmon lab bench-fleet --routes {n} --reps {reps} --fault {fault} --heartbeat-routes {heartbeat_routes}"
    return _bench_in_lab("bench-fleet", command, output, Lab(lab_dir), measure)


def _kept_section(output: Path, report: str, section: str) -> dict[str, Any] | None:
    """The ``section`` of the report's last JSON (next to ``output``) and the facts it was measured with."""
    import json

    from replmon.lab.benchreport import json_path_for

    path = json_path_for(output, report)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if section not in doc:
        return None
    return {section: doc[section], f"{section}_facts": doc.get(f"{section}_facts") or doc.get("facts")}


def _bench_in_lab(report: str, command: str, output: Path, lab: Any, measure: Callable[[Any], dict[str, Any]]) -> int:
    """A bench report measured in ``lab``: its facts, ``measure(lab)``'s sections, the JSON, the page and the README block."""
    import time as _time

    from replmon.entry.runtime import quiet_handler_logs
    from replmon.lab.benchreport import SCHEMA, facts, finish, json_path_for
    from replmon.lab.servers import LabError

    check_output_file(output, "--output")
    quiet_handler_logs()  # the handlers the bench runs log at ERROR only (POWERTOOLS_LOG_LEVEL to see them)
    started = _time.time()
    doc: dict[str, Any] = {"schema": SCHEMA, "report": report, "facts": facts(command)}
    try:
        with lab:
            doc |= measure(lab)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    finish(doc, started, json_path_for(output, report), output)
    err.print(f"wrote {output}", highlight=False)
    return 0


@lab_app.command("bench-collector")
def lab_bench_collector(
    routes: Annotated[str, typer.Option("--routes", metavar="N", help="Registry routes, 1-5000 (each loaded with what a "
                                        "collector run reads: see the report).")] = "1000",
    repeats: Annotated[int, typer.Option(min=1, max=20, help="Steady collector runs (min / median / max); then one after a late "
                                         "write and one cold.")] = 3,
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data/bench-collector"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-COLLECTOR.md"),
) -> int:
    """The CollectSignals handler (template.yaml's environment) over N routes in DynamoDB Local: wall
    time, DynamoDB calls and items read per route, steady, after a late write and cold."""
    from replmon.lab.collectorbench import run_collector_bench
    from replmon.lab.lab import TABLE, Lab

    n = int(routes) if routes.isdigit() else 0  # a string like every other --routes (a count here)
    if not 1 <= n <= 5000:
        fail(f"--routes {routes!r}: give a number of routes from 1 to 5000")
    command = f"replmon lab bench-collector --routes {n} --repeats {repeats}"
    return _bench_in_lab("bench-collector", command, output, Lab(lab_dir, events=False, least_privilege=False),
                         lambda lab: {"collector": run_collector_bench(lab.servers["dynamodb"].url, TABLE, n, repeats=repeats,
                                                                       progress=lambda m: err.print(m, highlight=False))})


@lab_app.command("bench-mounts")
def lab_bench_mounts(
    reps: Annotated[int, typer.Option(min=3, max=10, help="Repetitions of M1 (alternating runner and bare fio) and of M2/M3: "
                                      "every figure is reported as min / median / max.")] = 3,
    rtt_ms: Annotated[int, typer.Option(min=2, max=1000, help="M3: the round trip Toxiproxy adds, ms (145: Ohio - Tokyo).")] = 145,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The bench's directory.")] = Path("lab-data/bench-mounts"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-MOUNTS.md"),
) -> int:
    """M1 runner overhead vs bare fio, M2 lab Mountpoint vs s3fs sequential reads, M3 the drop under
    an added round trip; writes docs/BENCH-MOUNTS.md."""
    from replmon.lab.mountbench import run_mount_bench
    from replmon.lab.servers import LabError

    check_output_file(output, "--output")
    check_output_dir(lab_dir, "--dir")  # M1 writes DIR/overhead before the lab claims DIR/lab
    try:
        run_mount_bench(out, lab_dir, output, reps=reps, rtt_ms=rtt_ms)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    return 0


@lab_app.command("chaos", epilog=help_for("lab chaos"))
def lab_chaos(
    fault: Annotated[str, typer.Option(help="latency (4 s per answer), bandwidth (256 KB/s), hang (no data until healed) or reset (connections reset).")] = "latency",
    target: Annotated[float, typer.Option(min=0.1, metavar="SECONDS", help="Latency target: the RPO alarm's and the SLO's "
                                          "threshold (LatencyTargetSeconds).")] = 2.0,
    probes: Annotated[int, typer.Option(min=1, max=20, help="Probes per phase.")] = 3,
    sizes: Annotated[str, typer.Option(help="Probe sizes.")] = "1MiB",
    timeout: Annotated[int, typer.Option(min=5, help="Seconds a probe may take before it is STUCK.")] = 30,
    lab_dir: Annotated[Path, typer.Option("--dir", metavar="DIR", help=LAB_DIR_HELP)] = Path("lab-data/chaos"),
    stall: Annotated[bool, typer.Option("--stall", help="Instead: heartbeats through the real Heartbeat function; seconds from "
                                        "the fault to STALLED and to the RouteStalled alarm, from healing to HEALTHY and OK.")] = False,
    routes: Annotated[str | None, typer.Option("--routes", metavar="N", help="With --stall: a lab fleet of N (1-99) replicated "
                                               "bucket pairs the inventory finds (each through its own listener); the fault breaks one.")] = None,
    route: Annotated[str | None, typer.Option("--route", metavar="NAME", help="With --routes: the route to fault (app-NN; "
                                              "default the middle one).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Break the lab's replication path; watch the route breach and recover.

    Baseline, fault, healed: probes through the real state machine while Toxiproxy breaks the
    replication path; each phase's RPO, SLO burn and alert state with the alarms' thresholds.
    The headline judges the healed route as `replmon report` would. With --stall: stall detection
    at the lab's cadence (heartbeats every 10 s), docs/SEMANTICS.md "Stalls".
    """
    if (routes is not None or route is not None) and not stall:
        fail("--routes/--route: the lab fleet's fault runs with --stall (heartbeats on every route, the fleet alarm)")
    if route is not None and routes is None:
        fail("--route: name the fleet's size too (--routes N)")
    if stall and routes is not None:
        return _chaos_fleet(fault, fleet_size(routes), route, lab_dir, fmt)
    if stall:
        return _chaos_stall(fault, lab_dir, fmt)
    from replmon.lab.chaos import run_chaos
    from replmon.lab.faults import FAULTS
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.probe.request import load_settings

    if fault not in FAULTS:
        fail(f"--fault {fault!r}: use one of {', '.join(FAULTS)}")
    try:
        load_settings({"sizes": sizes})
    except ConfigError as exc:
        fail(config_message(exc))
    try:
        with Lab(lab_dir) as lab:
            err.print(f"lab up; replication goes through Toxiproxy {lab.servers['toxiproxy'].url} (proxy on :{lab.replication_proxy_port})",
                      highlight=False)
            phases = run_chaos(lab, fault, target_seconds=target, probes=probes, sizes=sizes, timeout=timeout,
                               progress=lambda p: err.print(f"{p.name}: {p.row()['state']} ({p.seconds:.0f} s)", highlight=False))
            left = lab.leftovers()
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    from replmon.cli.output import envelope
    from replmon.signals.health import health_output

    rows = [p.row() for p in phases]
    ok = not phases[0].breached and phases[1].breached and not phases[2].breached
    code = OK if ok else Exit.BREACH
    now = phases[-1].verdict()
    outcome = ("breached under the fault and recovered after healing" if ok else "did NOT breach and recover as expected")
    doc = envelope("lab chaos", [now], code, target, fault=fault, breached_and_recovered=ok, left_behind=left, phases=[
        {"phase": p.name, "fault": p.fault, "duration_seconds": p.seconds, "statuses": [str(s) for s in p.statuses],
         "breached": p.breached, "verdict": p.verdict().to_json(), "health": health_output(p.health), "notes": p.notes} for p in phases])
    print_headline([now], fmt)
    (out if fmt is Format.table else err).print(f"lab chaos {fault}: {outcome}", highlight=False, markup=False)
    if fmt is Format.csv:
        rows = [{"phase": p["phase"], "fault": p["fault"], "duration_seconds": p["duration_seconds"], "verdict": p["verdict"]["verdict"],
                 "rpo_seconds": p["verdict"]["rpo_seconds"], "rpo_bound": p["verdict"]["rpo_bound"],
                 "within_target_probes": p["verdict"]["within_target_probes"], "judged_probes": p["verdict"]["judged_probes"],
                 "breached": p["breached"]} for p in doc["phases"]]
    emit(rows, fmt, f"lab chaos: {fault}, target {target:g} s, thresholds from template.yaml", document=doc)
    return code


def _chaos_stall(fault: str, lab_dir: Path, fmt: Format) -> int:
    from replmon.lab.faults import FAULTS
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.lab.stallbench import LAB_FLOOR, LAB_PERIOD, heartbeat_deps, heartbeat_driver, one_fault
    from replmon.local.aslrun import load_handler

    if fault not in FAULTS:
        fail(f"--fault {fault!r}: use one of {', '.join(FAULTS)}")
    try:
        with Lab(lab_dir) as lab:
            err.print(f"lab up; heartbeats every {LAB_PERIOD} s (floor {LAB_FLOOR} s) through the real Heartbeat function; "
                      f"Toxiproxy `{fault}` on the replication path", highlight=False)
            rep = one_fault(lab, lab.route(f"stall-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"), fault, heartbeat_deps(lab),
                            heartbeat_driver(load_handler("Heartbeat"), periods=1))
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    ok = rep["stalled_s"] is not None and rep["healthy_s"] is not None and not rep["before_fault_transitions"]
    row = {"fault": fault, "STALLED s": rep["stalled_s"], "ALARM s": rep["alarm_s"], "HEALTHY s (after healing)": rep["healthy_s"],
           "OK s (after healing)": rep["alarm_ok_s"], "messages": len(rep["messages"])}
    emit([row], fmt, f"lab chaos --stall: {fault}, heartbeats every {LAB_PERIOD} s (the RouteStalled alarm's minute = one period)",
         document={"schema_version": 1, "command": "lab chaos", "stall": True, "fault": fault, "stalled_and_recovered": ok, **rep})
    (out if fmt is Format.table else err).print(f"lab chaos --stall {fault}: " + ("stalled and recovered" if ok else "did NOT stall and recover as expected"),
                                                highlight=False, markup=False)
    return OK if ok else Exit.BREACH


def _chaos_fleet(fault: str, routes: int, route: str | None, lab_dir: Path, fmt: Format) -> int:
    from replmon.lab.faults import FAULTS
    from replmon.lab.fleetlab import fleet_fault, route_bucket, setup_fleet
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.lab.stallbench import ALARM, LAB_FLOOR, LAB_PERIOD
    from replmon.local.aslrun import load_handler

    if fault not in FAULTS:
        fail(f"--fault {fault!r}: use one of {', '.join(FAULTS)}")
    from replmon.entry.runtime import quiet_handler_logs

    quiet_handler_logs()  # as lab run: POWERTOOLS_LOG_LEVEL to see the handlers' JSON logs
    route = route or route_bucket((routes + 1) // 2)
    if route not in {route_bucket(i) for i in range(1, routes + 1)}:
        fail(f"--route {route!r}: the lab fleet's routes are {route_bucket(1)} to {route_bucket(routes)} (--routes {routes})")
    try:
        with Lab(lab_dir) as lab:
            fleet = setup_fleet(lab, routes)
            err.print(f"lab fleet up: {len(fleet.routes)} routes the inventory found probeable, "
                      f"{len(fleet.survey) - len(fleet.routes)} other buckets (below); heartbeats every {LAB_PERIOD} s "
                      f"(floor {LAB_FLOOR} s), one Heartbeat invocation for the group", highlight=False)
            rep = fleet_fault(fleet, route, fault, load_handler("Heartbeat"), progress=lambda m: err.print(m, highlight=False))
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith(("--dir", "--route")) else INFRASTRUCTURE)
    ok = rep["named_only_the_faulted_route"]
    if fmt is Format.table:
        emit([x for x in fleet.survey if x["bucket"] not in fleet.proxies], fmt, "buckets the inventory read that are not in the fleet (and why)",
             columns=["bucket", "mode", "reason", "detail"])
    left = sum(len(v) for v in rep["left_behind"].values())
    row = {"routes": rep["routes"], "faulted": route, "fault": fault, "STALLED s": rep["stalled_s"], "ALARM s": rep["alarm_s"],
           "routes in ALARM": ", ".join(rep["in_alarm"]) or "none", "HEALTHY s (after healing)": rep["healthy_s"],
           "OK s (after healing)": rep["alarm_ok_s"], "left behind": left}
    emit([row], fmt, f"lab chaos --stall --routes {routes}: the fleet alarm {ALARM} over {rep['contributors']} contributors "
         f"(one alarm minute = one {LAB_PERIOD} s period)",
         document={"schema_version": 1, "command": "lab chaos", "stall": True, "fleet": True, "survey": fleet.survey, **rep})
    (out if fmt is Format.table else err).print(
        f"lab chaos --stall --routes {routes} {fault} on {route}: "
        + ("the fleet alarm named that route and no other" if ok else "the fleet alarm did NOT name exactly that route "
           "(or a route stalled before the fault, or the Heartbeat failed: see the JSON)"),
        highlight=False, markup=False)
    return OK if ok else Exit.BREACH


def _check_markdown(path: Path | None, preset: str) -> None:
    """The generated report `lab fio --markdown` rewrites, checked before the run (not after its
    minutes): UTF-8 text, and the preset's section whole if it has one."""
    if path is None or not path.exists():
        return
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        fail(f"--markdown: cannot read {path}: {exc.strerror}")
    except UnicodeDecodeError as exc:
        fail(f"--markdown: {path} is not UTF-8 text (byte {exc.start}); give the generated report or a new file")
    start, end = f"<!-- lab-fio:{preset}:start -->", f"<!-- lab-fio:{preset}:end -->"
    if start in text and end not in text[text.index(start):]:
        fail(f"--markdown: {path} has {start} without {end} after it; restore the end marker or remove the section")


@lab_app.command("fio")
def lab_fio(
    preset: Annotated[str, typer.Option(help="A mount preset (replmon fio presets).")] = "mountpoint-xregion",
    scale: Annotated[str, typer.Option(help="full, small (1/64 of sizes and run times) or tiny (1/1024).")] = "small",
    mount: Annotated[list[str] | None, typer.Option("--mount", metavar="NAME", help="mountpoint, mountpoint-cache, mountpoint-xregion, "
                                                    "mountpoint-credits, s3fs, local (repeat; default: all, mountpoint-credits only for "
                                                    "the burst presets).")] = None,
    rtt_ms: Annotated[int, typer.Option(min=2, max=1000, help="mountpoint-xregion: the round trip Toxiproxy adds (half each way), ms; "
                                                              "145 is about Ohio - Tokyo, the study's pair.")] = 145,
    throttle_after: Annotated[float | None, typer.Option(min=1, help="mountpoint-credits: the seconds its credit balance holds at the "
                                                                     "full burst, counted from the start of the measured I/O (earned at "
                                                                     "--throttle-mibps, spent at the rate used: a slower or stalled client "
                                                                     "falls later; default: 40 % of the preset's run time at --scale).")] = None,
    burst_mibps: Annotated[int, typer.Option(min=1, help="mountpoint-credits: the total rate during the burst, MiB/s (one budget over "
                                                     "every connection, as a file system's credits are).")] = 20,
    throttle_mibps: Annotated[int, typer.Option(min=1, help="mountpoint-credits: the total rate after the burst, MiB/s (a steeper "
                                                        "fall than the study's 604/149, to stand above the lab's noise).")] = 3,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The lab's directory.")] = Path("lab-data/fio"),
    charts: Annotated[Path | None, typer.Option(metavar="DIR", help="Write the PNG chart here, named per run "
                                                "(lab-fio-<preset>-<time>.png; default: the lab's directory).")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write this preset's report into a generated Markdown file (e.g. docs/LAB-MOUNTS.md).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """A preset through the real fio runner on Mountpoint's own file-system code, s3fs and a local
    directory (and Mountpoint behind Toxiproxy's added round trip); stores the results in the lab's
    DynamoDB Local as IngestFioResults does, prints the study-shaped table, writes a chart.
    Exit 0 when every target's run succeeded and left nothing mounted."""
    from replmon.cli.fio import print_report
    from replmon.lab.lab import Lab
    from replmon.lab.mounts import LAB_TARGETS, default_targets, fell_s, markdown_section, report, run_lab_fio, summary, write_markdown
    from replmon.lab.mounts import charts as draw
    from replmon.lab.servers import LabError
    from replmon.mounts import presets as p

    try:
        p.expand(preset, "mountpoint", scale)
    except p.PresetError as exc:
        fail(f"--preset/--scale: {exc}")
    targets = mount or default_targets(preset)
    bad = [t for t in targets if t not in LAB_TARGETS]
    if bad:
        fail(f"--mount {bad[0]!r}: use any of {', '.join(LAB_TARGETS)}")
    check_output_dir(charts, "--charts")
    check_output_file(markdown, "--markdown")
    _check_markdown(markdown, preset)
    if "mountpoint-credits" in targets and throttle_mibps >= burst_mibps:
        fail(f"--throttle-mibps {throttle_mibps}: the rate once the credits ran out (the baseline they are earned at) must be "
             f"below --burst-mibps ({burst_mibps}); e.g. --burst-mibps 20 --throttle-mibps 3")
    if throttle_after is None:
        from replmon.lab.mounts import default_throttle_after

        throttle_after = default_throttle_after(preset, scale)
    try:
        with Lab(lab_dir, events=False, least_privilege=False) as lab:
            runs = run_lab_fio(lab, preset, scale, targets, rtt_ms=rtt_ms, throttle_after=throttle_after, throttle_mibps=throttle_mibps,
                               burst_mibps=burst_mibps, progress=lambda m: err.print(m, highlight=False))
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith(("--dir", "--mount")) else INFRASTRUCTURE)
    rep = report(preset, runs)
    png = draw(preset, runs, (charts or lab_dir) / f"lab-fio-{preset}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.png")
    print_report(rep, fmt, title=f"lab fio: {preset} at scale {scale}", document={
        "scale": scale, "rtt_ms": rtt_ms, "throttle": {"after_s": throttle_after, "burst_mibps": burst_mibps, "sustained_mibps": throttle_mibps,
                                                                  "ran_out_s": {r.target: fell_s(r) for r in runs if r.target == "mountpoint-credits"}},
        "runs": summary(runs), "chart_files": [str(png)]})
    if fmt is Format.table:
        emit(summary(runs), fmt, "runs (stored in the lab's DynamoDB Local)")
        drop = rep.comparisons.get("cross_region_drop")
        if drop and drop["mean"] is not None:
            out.print(f"Toxiproxy +{rtt_ms} ms round trip: mean drop {drop['mean']:.0%} over the jobs vs the plain mount "
                      "(study R2: ~70 % lower, Ohio -> Tokyo vs Tokyo -> Tokyo; qualitative: loopback has no bandwidth limit)",
                      highlight=False)
        out.print(f"chart: {png}", highlight=False)
    if markdown:
        command = f"replmon lab fio --preset {preset} --scale {scale}" + "".join(f" --mount {t}" for t in targets) + \
            (f" --rtt-ms {rtt_ms}" if "mountpoint-xregion" in targets else "") + \
            (f" --throttle-after {throttle_after:g} --burst-mibps {burst_mibps} --throttle-mibps {throttle_mibps}" if "mountpoint-credits" in targets else "")
        err.print(f"wrote {write_markdown(markdown, preset, markdown_section(preset, scale, rep, runs, command))}", highlight=False)
    return 0 if all(r.result.exit_code == 0 for r in runs) else 1
