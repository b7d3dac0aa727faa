"""`replmon`: probe any S3 or S3-compatible pair, report from the store, estimate cost, run the lab.

    replmon lab run                    # the README's main command (via `make demo`)
    replmon probe --source-bucket a --dest-bucket b --sizes 1MiB,64MiB --stack-name replmon
    replmon report --route primary --hours 24 --format json --stack-name replmon
    replmon cost --sizes 1MiB,64MiB,1GiB --rate-minutes 15
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from replmon.cli.common import (
    EXIT_CODES_HELP,
    FORMAT_HELP,
    INFRASTRUCTURE,
    OK,
    USAGE,
    CliError,
    Format,
    check_output_file,
    check_url,
    emit,
    err,
    fail,
    report_error,
    stack_outputs,
)
from replmon.probe import ladders as presets

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure S3 replication latency (RPO) with active probes. " + EXIT_CODES_HELP)
lab_app = typer.Typer(no_args_is_help=True, help="The local lab: two MinIO servers with real replication, DynamoDB Local.")
app.add_typer(lab_app, name="lab")


# ---------------------------------------------------------------------------------------- report
@app.command(epilog=EXIT_CODES_HELP)
def report(
    route: Annotated[list[str], typer.Option(help="Route name (repeat for several).")],
    hours: Annotated[float, typer.Option(help="Window: the last N hours.")] = 24.0,
    table: Annotated[str | None, typer.Option(envvar="REPLMON_TABLE", help="Latency table (or --stack-name).")] = None,
    stack_name: Annotated[str | None, typer.Option(help="A deployed replmon stack: its table comes from the stack's outputs.")] = None,
    region: Annotated[str | None, typer.Option(envvar="AWS_REGION", help="AWS region of the table / stack.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", help="AWS profile for credentials.")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", help="e.g. the lab's DynamoDB Local")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
    chart: Annotated[Path | None, typer.Option(help="Also write a PNG chart here.")] = None,
    slo_target: Annotated[float, typer.Option(help="SLO: percent of probes within --slo-threshold.", min=50, max=99.999)] = 99.99,
    slo_threshold: Annotated[float, typer.Option(help="SLO: seconds (RTC's 900).", min=1)] = 900.0,
    rpo_window: Annotated[float, typer.Option(help="RPO: how far back to look, seconds.", min=60)] = 3600.0,
) -> int:
    """The Report function's statistics, from a deployed stack's table or the lab's DynamoDB Local;
    then each route's RPO, SLO attainment, error budget left and burn rates (docs/SEMANTICS.md)."""
    from pydantic import ValidationError

    from replmon.adapters.dynamodb import READ_CONFIG, DynamoLatencyStore
    from replmon.cli.common import aws_region_or_fail
    from replmon.local.execution import _why
    from replmon.probe.report import ReportRequest, build_report, collect, window

    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    check_output_file(chart, "--chart")
    try:
        req = ReportRequest(routes=route, hours=hours)
    except ValidationError as exc:
        fail("; ".join(f"--{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    aws_region_or_fail(region, dynamodb_endpoint, "--region", profile)
    if stack_name:
        table = stack_outputs(stack_name, region, profile).get("LatencyTableName")
    if not table:
        if not dynamodb_endpoint:
            fail("--table or --stack-name: which latency table? (the deployed stack's output LatencyTableName)")
        table = "replmon-latency"  # the lab's
    store = DynamoLatencyStore(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, config=READ_CONFIG)
    now = time.time()
    try:
        rep = build_report(store, req, now)
    except Exception as exc:
        fail(f"latency store {table!r}: {_why(exc)}", INFRASTRUCTURE)
    from replmon.probe.steps import slo_spec
    from replmon.signals.ingest import route_health

    spec = slo_spec({"threshold_seconds": slo_threshold, "target_percent": slo_target})
    try:
        rep["health"] = [route_health(store, r, now, spec, rpo_window).to_json(spec) for r in route]
    except Exception as exc:
        fail(f"latency store {table!r}: {_why(exc)}", INFRASTRUCTURE)
    rows = rep["summaries"]
    if fmt is Format.json:
        emit(rows, fmt, document=rep)
    else:
        emit(rows, fmt, f"{rep['probes']} probes, {rep['window']['start']} .. {rep['window']['end']}",
             columns=["route", "size_class", "probes", "completed", "failed", "stuck", "errors", "p50", "p90", "p99", "max",
                      "share_within_target", "mib_per_s", "heads_per_probe", "max_width"])
    if fmt is Format.table:  # CSV stays one table (the size classes); JSON has everything
        emit([health_row(h) for h in rep["health"]], fmt, f"RPO (last {rpo_window:g} s) and SLO ({slo_target:g} % within {slo_threshold:g} s)",
             columns=list(health_row(rep["health"][0]).keys()) if rep["health"] else None)
    if chart:
        from replmon.local.charts import latency_chart

        start, end = window(req, now)
        latency_chart(collect(store, req.routes, start, end), chart, f"replmon: {', '.join(route)}, last {hours:g} h")
        err.print(f"chart: {chart}")
    return OK


def health_row(h: dict[str, object]) -> dict[str, object]:
    """One route's RPO and SLO as a table row."""
    rpo, slo = h["rpo"], h["slo"]
    assert isinstance(rpo, dict) and isinstance(slo, dict)
    burn = slo["burn_rates"]

    def pct(v: float | None) -> float | None:
        return None if v is None else round(100 * v, 3)

    return {"route": h["route"], "rpo_s": "unbounded" if rpo["unbounded"] else rpo["seconds"],
            "why": "; ".join(rpo["reasons"]) or "-", "slo_probes": f"{slo['good']}/{slo['total']}",
            "attainment_%": pct(slo["attainment"]), "budget_left_%": pct(slo["budget_left"]),
            **{f"burn_{k}": v for k, v in burn.items()},
            "alerts": ",".join(k for k, v in slo["alerts"].items() if v) or "-",
            "pending_bytes": rpo["inputs"].get("rtc_bytes_pending"), "events": sum(h["events"].values()) if isinstance(h["events"], dict) else 0}


@app.command("presets")
def list_presets(fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table) -> int:
    """The named probe ladders (presets.json): sizes and trials a preset brings."""
    from replmon.core.sizes import format_size

    rows = []
    for name in presets.names():
        p = presets.preset(name)
        rows.append({"preset": name, "sizes": ",".join(format_size(s) for s in p.sizes), "trials": p.trials,
                     "description": p.description})
    emit(rows, fmt, "presets", columns=["preset", "sizes", "trials", "description"])
    return OK


def _register() -> None:
    from replmon.cli import cost, fio, labcmd, probe, signals  # noqa: F401 - each adds its commands to the app


_register()


def _click_exceptions() -> tuple[type[Exception], ...]:
    """The command-line parser's usage errors: typer >= 0.29 vendors click as typer._click."""
    try:
        from typer._click.exceptions import ClickException as Vendored  # the parser typer really uses
    except ImportError:  # pragma: no cover - older typer on click
        from click import ClickException as Vendored  # type: ignore[assignment]
    return (Vendored,)


def main(argv: list[str] | None = None) -> None:
    """The console entry: one line and an exit code for every error, never a traceback."""
    from replmon.local.execution import Interrupted, RunInterrupted, interrupts, salvage_summary

    try:
        with interrupts():
            code = app(args=argv, standalone_mode=False)
    except CliError as exc:
        code = report_error(exc)
    except RunInterrupted as exc:
        for line in salvage_summary(exc.salvage):
            err.print(line, highlight=False)
        code = 128 + {"SIGINT": 2, "SIGTERM": 15}.get(exc.salvage.signame, 0)
    except Interrupted as exc:
        err.print(f"interrupted by {exc.signame}; nothing was running", highlight=False)
        code = exc.exit_code
    except typer.Abort:
        code = 130
    except _click_exceptions() as exc:  # typer's own parsing: unknown option, bad choice...
        from rich.markup import escape

        err.print(f"[bold red]error:[/] {escape(getattr(exc, 'format_message', exc.__str__)())}", highlight=False, soft_wrap=True)
        code = USAGE
    sys.exit(code if isinstance(code, int) else OK)
