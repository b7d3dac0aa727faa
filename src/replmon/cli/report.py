"""`replmon report`: the Report function's statistics, then each route's RPO and SLO, from a
deployed stack's table or the lab's DynamoDB Local."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from replmon.adapters.explain import explain
from replmon.cli.common import INFRASTRUCTURE, OK, aws_region_or_fail, check_output_file, check_url, fail, stack_outputs
from replmon.cli.render import FORMAT_HELP, Format, emit, err, health_row
from replmon.core.defaults import DEFAULTS


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
    slo_target: Annotated[float, typer.Option(help="SLO: percent of probes within --slo-threshold.", min=50, max=99.999)] = round(DEFAULTS.slo_target * 100, 6),
    slo_threshold: Annotated[float, typer.Option(help="SLO: seconds (RTC's 900).", min=1)] = 900.0,
    rpo_window: Annotated[float, typer.Option(help="RPO: how far back to look, seconds.", min=60)] = 3600.0,
) -> int:
    """The Report function's statistics, from a deployed stack's table or the lab's DynamoDB Local;
    then each route's RPO, SLO attainment, error budget left and burn rates (docs/SEMANTICS.md)."""
    from pydantic import ValidationError

    from replmon.probe.latency_report import ReportRequest, build_report, records_in, window
    from replmon.signals.health import route_health
    from replmon.signals.slo import slo_spec
    from replmon.wiring import latency_table

    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    check_output_file(chart, "--chart")
    try:
        req = ReportRequest(routes=route, hours=hours)
    except ValidationError as exc:
        fail("; ".join(f"--{'route' if e['loc'][0] == 'routes' else e['loc'][0]}: {e['msg'].removeprefix('Value error, ')}"
                       for e in exc.errors()))
    aws_region_or_fail(region, dynamodb_endpoint, "--region", profile)
    if stack_name:
        table = stack_outputs(stack_name, region, profile).get("LatencyTableName")
    if not table:
        if not dynamodb_endpoint:
            fail("--table or --stack-name: which latency table? (the deployed stack's output LatencyTableName)")
        table = "replmon-latency"  # the lab's
    store = latency_table(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, call="read")
    now = time.time()
    try:
        rep = build_report(store, req, now)
    except Exception as exc:
        fail(f"latency store {table!r}: {explain(exc)}", INFRASTRUCTURE)
    spec = slo_spec({"threshold_seconds": slo_threshold, "target_percent": slo_target})
    try:
        rep["health"] = [route_health(store, r, now, spec, rpo_window).to_json(spec) for r in route]
    except Exception as exc:
        fail(f"latency store {table!r}: {explain(exc)}", INFRASTRUCTURE)
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
        from replmon.local.latency_chart import latency_chart

        start, end = window(req, now)
        latency_chart(records_in(store, req.routes, start, end), chart, f"replmon: {', '.join(route)}, last {hours:g} h")
        err.print(f"chart: {chart}")
    return OK
