"""`replmon`: probe any S3 or S3-compatible pair, report from the store, run the local lab.

    replmon lab run                    # the README's main command (via `make demo`)
    replmon probe --source-bucket a --dest-bucket b --sizes 1MiB,64MiB --table replmon-latency
    replmon report --route primary --hours 24 --format json
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from replmon import presets
from replmon.config import ConfigError
from replmon.record import ProbeRecord
from replmon.stats import SizeSummary, summarize

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Measure S3 replication latency (RPO) with active probes.")
lab_app = typer.Typer(no_args_is_help=True, help="The local lab: two MinIO servers with real replication, DynamoDB Local.")
app.add_typer(lab_app, name="lab")
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def fail(message: str) -> typer.Exit:
    """One line on stderr, exit 2."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _one_line(exc: ConfigError) -> str:
    return "; ".join(ln.strip() for ln in str(exc).splitlines()[1:])


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def summary_table(summaries: list[SizeSummary], title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("route", "size", "trials", "p50 s", "p90 s", "p99 s", "max s", "MiB/s", "HEADs/probe", "error bound s", "within target", "failed/stuck/error"):
        t.add_column(col, justify="left" if col in ("route", "size") else "right")
    for s in summaries:
        t.add_row(
            s.route, s.size_class, f"{s.completed}/{s.probes}", _fmt(s.p50), _fmt(s.p90), _fmt(s.p99), _fmt(s.max),
            _fmt(s.mib_per_s, ".1f"), _fmt(s.heads_per_probe, ".1f"), _fmt(s.max_width, ".3f"),
            "-" if s.share_within_target is None else f"{100 * s.share_within_target:.0f} %",
            f"{s.failed}/{s.stuck}/{s.errors}",
        )
    return t


def write_data(records: list[ProbeRecord], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([r.to_item() for r in records], indent=1, default=str))
    return path


def progress_bar() -> Progress:
    return Progress(TextColumn("[bold]probes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                    disable=not err.is_terminal and os.environ.get("REPLMON_PROGRESS") != "1")


# ---------------------------------------------------------------------------------------- lab
@lab_app.command("run")
def lab_run(
    sizes: Annotated[str, typer.Option(help="Preset name or comma-separated sizes (1MiB,64MiB,...).")] = "lab-ladder",
    trials: Annotated[int, typer.Option(help="Trials per size.")] = 3,
    bandwidth: Annotated[str, typer.Option(help="MinIO replication bandwidth limit (100MiB is MinIO's minimum).")] = "100MiB",
    resolution: Annotated[float, typer.Option(help="Polling floor in seconds (AWS default 1.0; the lab can afford finer).")] = 0.1,
    timeout: Annotated[int, typer.Option(help="Seconds before a probe counts as STUCK.")] = 600,
    lab_dir: Annotated[Path, typer.Option("--dir", help="Lab data: servers' data, logs, chart, records.")] = Path("lab-data"),
) -> None:
    """Start the lab, run a probe ladder through the real state machine, print the table, draw the chart."""
    from replmon.config import load_request
    from replmon.lab.lab import Lab, lab_route
    from replmon.lab.servers import LabError
    from replmon.local.charts import latency_chart
    from replmon.local.runner import run_request

    payload: dict[str, Any] = {"sizes": sizes, "trials": trials, "timeout_seconds": timeout, "max_concurrency": 1,
                               "poll": {"floor_seconds": resolution}}
    try:  # bad flags fail before any server starts (the URLs are placeholders until then)
        load_request({**payload, "routes": [lab_route("lab", "http://127.0.0.1:1", "http://127.0.0.1:2")]})
    except ConfigError as exc:
        raise fail(_one_line(exc)) from None
    try:
        with Lab(lab_dir, bandwidth=bandwidth) as lab:
            err.print(f"lab up: source {lab.servers['source'].url}, destination {lab.servers['destination'].url} "
                      f"(replication limit {bandwidth}/s), DynamoDB Local {lab.servers['dynamodb'].url}")
            payload["routes"] = [lab.route()]
            with progress_bar() as bar:
                task = bar.add_task("probes", total=None)
                result = run_request(payload, lab.deps(), on_progress=lambda n, total: bar.update(task, completed=n, total=total),
                                     function_deps=lab.function_deps())
            left = lab.leftovers()
    except LabError as exc:
        raise fail(str(exc)) from None
    records = result.records
    out.print(summary_table(summarize(records), f"run {result.run_id}: {len(records)} probes in {result.seconds:.0f} s"))
    chart = latency_chart(records, lab_dir / "latency-vs-size.png", f"replmon lab: MinIO -> MinIO at {bandwidth}/s, run {result.run_id}")
    data = write_data(records, lab_dir / "runs" / f"{result.run_id}.json")
    out.print(f"chart: {chart}\nrecords: {data} (and DynamoDB Local under {lab_dir / 'dynamodb'}, kept between runs)")
    leftover = sum(len(v) for v in left.values())
    out.print(f"left behind: {leftover} probe objects/versions" + ("" if not leftover else f" {left}"))
    planned = len((result.execution.output or {}).get("results") or [])
    if result.execution.status != "SUCCEEDED" or result.failed_iterations or leftover or len(records) != planned:
        raise fail(f"run incomplete: execution {result.execution.status} {result.execution.error or ''}, "
                   f"{result.failed_iterations} probe(s) failed beyond retries, {leftover} leftovers")


@lab_app.command("bench")
def lab_bench(
    trials: Annotated[int, typer.Option()] = 3,
    sizes: Annotated[str, typer.Option()] = "1MiB,16MiB,128MiB,1GiB",
    compose_size: Annotated[str, typer.Option(help="P3's probe size.")] = "4GiB",
    lab_dir: Annotated[Path, typer.Option("--dir")] = Path("lab-data/bench"),
) -> None:
    """P1 HEADs per probe, P2 accuracy against an independent observer, P3 composition speed, P4 record delay."""
    from replmon.lab.bench import run_bench

    run_bench(out, trials=trials, sizes=sizes, compose_size=compose_size, lab_dir=lab_dir)


# ---------------------------------------------------------------------------------------- probe
@app.command()
def probe(
    source_bucket: Annotated[str, typer.Option(help="Replication source bucket.")],
    dest_bucket: Annotated[list[str], typer.Option(help="Destination bucket (repeat for several).")],
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", help="S3-compatible URL; omit for AWS.")] = None,
    dest_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ENDPOINT", help="S3-compatible URL; omit for AWS.")] = None,
    source_region: Annotated[str | None, typer.Option()] = None,
    dest_region: Annotated[str | None, typer.Option()] = None,
    route: Annotated[str, typer.Option(help="Route name the records are kept under.")] = "primary",
    prefix: Annotated[str, typer.Option(help="Probe key prefix (the replication rule must cover it).")] = "replmon-probes/",
    sizes: Annotated[str, typer.Option(help="Preset or comma-separated sizes.")] = "smoke",
    trials: Annotated[int, typer.Option()] = 1,
    timeout: Annotated[int, typer.Option(help="Seconds before a probe counts as STUCK.")] = 7200,
    target: Annotated[float, typer.Option(help="RPO target in seconds.")] = 900.0,
    concurrency: Annotated[int, typer.Option()] = 1,
    table: Annotated[str, typer.Option(envvar="REPLMON_TABLE", help="Latency store table.")] = "replmon-latency",
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT")] = None,
    access_key: Annotated[str | None, typer.Option(envvar="REPLMON_ACCESS_KEY_ID", help="For S3-compatible endpoints; AWS uses its credential chain.")] = None,
    secret_key: Annotated[str | None, typer.Option(envvar="REPLMON_SECRET_ACCESS_KEY")] = None,
    output: Annotated[str, typer.Option(help="table or json")] = "table",
) -> None:
    """Probe one route now, through the same state machine and handlers that deploy to AWS."""
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.metrics import NullMetrics
    from replmon.adapters.s3 import S3Stores
    from replmon.local.runner import PreflightError, preflight, run_request
    from replmon.service import Deps

    keys = (access_key, secret_key) if access_key and secret_key else None
    deps = Deps(stores=S3Stores(keys), latency_store=DynamoLatencyStore(table, endpoint_url=dynamodb_endpoint),
                metrics=NullMetrics())
    payload = {
        "routes": [{"name": route, "prefix": prefix,
                    "source": {"bucket": source_bucket, "endpoint_url": source_endpoint, "region": source_region},
                    "destinations": [{"bucket": b, "endpoint_url": dest_endpoint, "region": dest_region} for b in dest_bucket]}],
        "sizes": sizes, "trials": trials, "timeout_seconds": timeout, "target_seconds": target, "max_concurrency": concurrency,
    }
    try:
        preflight(payload, deps)
    except ConfigError as exc:
        raise fail(_one_line(exc)) from None
    except PreflightError as exc:
        raise fail(str(exc)) from None
    with progress_bar() as bar:
        task = bar.add_task("probes", total=None)
        result = run_request(payload, deps, on_progress=lambda n, total: bar.update(task, completed=n, total=total))
    if output == "json":
        out.print_json(json.dumps({"run_id": result.run_id, "records": [r.to_item() for r in result.records]}, default=str))
    else:
        out.print(summary_table(summarize(result.records), f"run {result.run_id}"))
    if result.execution.status != "SUCCEEDED" or result.failed_iterations:
        raise fail(f"execution {result.execution.status}: {result.execution.error or ''} {result.execution.cause or ''}".strip())


# ---------------------------------------------------------------------------------------- report
@app.command()
def report(
    route: Annotated[list[str], typer.Option(help="Route name (repeat for several).")],
    hours: Annotated[float, typer.Option(help="Window: the last N hours.")] = 24.0,
    table: Annotated[str, typer.Option(envvar="REPLMON_TABLE")] = "replmon-latency",
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", help="e.g. the lab's DynamoDB Local")] = None,
    output: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    chart: Annotated[Path | None, typer.Option(help="Also write a PNG chart here.")] = None,
) -> None:
    """The Report function's statistics, from the lab's DynamoDB Local or an AWS table."""
    import time

    from pydantic import ValidationError

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.report import ReportRequest, build_report, collect, window

    try:
        req = ReportRequest(routes=route, hours=hours)
    except ValidationError as exc:
        raise fail("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None
    store = DynamoLatencyStore(table, endpoint_url=dynamodb_endpoint)
    try:
        rep = build_report(store, req, time.time())
    except Exception as exc:
        from replmon.local.runner import _why

        raise fail(f"latency store {table!r}: {_why(exc)}") from None
    if output == "json":
        out.print_json(json.dumps(rep))
    else:
        summaries = [SizeSummary(**s) for s in rep["summaries"]]
        out.print(summary_table(summaries, f"{rep['probes']} probes, {rep['window']['start']} .. {rep['window']['end']}"))
    if chart:
        from replmon.local.charts import latency_chart

        start, end = window(req, time.time())
        latency_chart(collect(store, req.routes, start, end), chart, f"replmon: {', '.join(route)}, last {hours:g} h")
        err.print(f"chart: {chart}")


@app.command("presets")
def list_presets() -> None:
    """The named probe ladders (presets.json)."""
    from replmon.sizes import format_size

    for name in presets.names():
        p = presets.preset(name)
        out.print(f"[bold]{name}[/]: {', '.join(format_size(s) for s in p.sizes)} x {p.trials} trials - {p.description}")


def main() -> None:  # pragma: no cover - console entry
    sys.exit(app())


if __name__ == "__main__":  # python -m replmon.cli
    main()
