"""`replmon report`: the answer first (each route's RPO now against --target, the probes within
it, what is failing), then the latency statistics per size class and each route's RPO and SLO,
from a deployed stack's table, any latency table, or the lab's DynamoDB Local. The exit code is
the verdict (cli/exitcodes.py): scripts gate on it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replmon.adapters.explain import explain
from replmon.cli.common import INFRASTRUCTURE, aws_region_or_fail, check_output_dir, check_url, fail, stack_outputs
from replmon.cli.exitcodes import Exit, combine
from replmon.cli.render import FORMAT_HELP, WIDE_HELP, Format, emit, err, footnotes, out, print_headline, print_table, summary_rows
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import StoreUnavailable
from replmon.core.names import check_route_name


def report(
    route: Annotated[list[str] | None, typer.Option(metavar="NAME", help="Route name (repeat for several).")] = None,
    fleet: Annotated[bool, typer.Option("--fleet", help="Every route of the registry (replmon fleet), riskiest first: "
                                        "RPO, SLO attainment, budget left, burn and worst size class per route.")] = False,
    hours: Annotated[float, typer.Option(metavar="HOURS", help="Window of the statistics: the last N hours.")] = 24.0,
    target: Annotated[float, typer.Option(metavar="SECONDS", min=0.001, help="Latency target: RPO and every probe are judged "
                                          "against it (the stack's LatencyTargetSeconds).")] = DEFAULTS.target_seconds,
    slo_target_percent: Annotated[float, typer.Option(metavar="PERCENT", min=50, max=99.999,
                                                      help="SLO objective: percent of probes within --target (SloTargetPercent).")]
    = 100 * DEFAULTS.slo_target,
    rpo_window: Annotated[float, typer.Option(metavar="SECONDS", min=60, help="RPO now looks back this far.")] = DEFAULTS.rpo_window_seconds,
    table: Annotated[str | None, typer.Option(envvar="REPLMON_TABLE", metavar="NAME", help="Latency table (or --stack-name).")] = None,
    stack_name: Annotated[str | None, typer.Option(metavar="STACK", help="A deployed replmon stack: the table from its outputs.")] = None,
    region: Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="AWS Region of the table and stack.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                                help="AWS profile (else the default credential chain).")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DYNAMODB_ENDPOINT", metavar="URL",
                                                          help="A DynamoDB-compatible URL, e.g. the lab's; omit for AWS.")] = None,
    charts: Annotated[Path | None, typer.Option(metavar="DIR", help="Write two PNG charts here, named per report: latency over "
                                                "time (target line, breaches marked) and latency vs size.")] = None,
    wide: Annotated[bool, typer.Option("--wide", help=WIDE_HELP)] = False,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
    slo_threshold: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --target.")] = None,
    slo_target: Annotated[float | None, typer.Option(hidden=True, help="Deprecated: --slo-target-percent.")] = None,
) -> int:
    """Each route's RPO now against --target, then statistics, RPO and SLO.

    Reads a deployed stack's table, any latency table, or the lab's DynamoDB Local. AWS tables
    are read with the default AWS credential chain (environment, AWS_PROFILE or --profile, SSO,
    instance role). See docs/SEMANTICS.md for what each number means.
    """
    from replmon.cli.output import envelope, summary_json, within_counts
    from replmon.core.keys import iso_ms
    from replmon.core.stats import summarize
    from replmon.probe.latency_report import records_in
    from replmon.signals.health import health_output, route_health
    from replmon.signals.slo import slo_spec
    from replmon.signals.verdict import duration, judge_health
    from replmon.wiring import latency_table

    if slo_threshold is not None:  # the old names: one concept, one flag (CHANGELOG 0.2.0)
        err.print("--slo-threshold is deprecated: use --target", highlight=False)
        target = slo_threshold
    if slo_target is not None:
        err.print("--slo-target is deprecated: use --slo-target-percent", highlight=False)
        slo_target_percent = slo_target
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    check_output_dir(charts, "--charts")
    if charts is not None:  # matplotlib comes with the lab extra only: say so before reading anything
        try:
            import matplotlib  # noqa: F401
        except ModuleNotFoundError as exc:
            fail(f"--charts: {exc.name or 'matplotlib'} is not installed (it comes with the lab extra: pip install 'replmon[lab]')")
    if not 0 < hours <= 24 * 400:
        fail(f"--hours: {hours:g} is outside (0, 9600]; give the window in hours, e.g. 24")
    if fleet and route:
        fail("--fleet and --route: --fleet reports every route of the registry; give one or the other")
    if not fleet and not route:
        fail("--route or --fleet: which routes? (--route NAME, repeatable, or --fleet for the registry's)")
    route = list(route or [])
    for name in route:  # one name pattern (core/names.py): a bad name is a usage error naming the flag
        try:
            check_route_name(name)
        except ValueError as exc:
            fail(f"--route: {str(exc).removeprefix('Value error, ')}")
    aws_region_or_fail(region, dynamodb_endpoint, "--region", profile)
    if stack_name:
        table = stack_outputs(stack_name, region, profile).get("LatencyTableName")
    if not table:
        if not dynamodb_endpoint:
            fail("--table or --stack-name: which latency table? (the deployed stack's output LatencyTableName)")
        table = "replmon-latency"  # the lab's
    store = latency_table(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, call="read")
    now = time.time()
    start = now - hours * 3600
    spec = slo_spec({"threshold_seconds": target, "target_percent": slo_target_percent})
    registry_rows: list[dict[str, object]] = []
    if fleet:
        from replmon.adapters.registry_table import DynamoRegistry
        from replmon.fleet.risk import registry_rows as read_registry

        try:
            registry_rows = read_registry(DynamoRegistry(store.table, store.client))  # type: ignore[attr-defined]
        except Exception as exc:
            fail(f"route registry in {table!r}: {explain(exc)}", INFRASTRUCTURE)
        if not registry_rows:
            fail(f"--fleet: the registry in {table!r} has no routes (replmon fleet put, or the inventory, adds them)", Exit.NO_DATA)
        route = [str(r["route"]) for r in registry_rows if r["mode"] != "invalid"]  # an invalid item has no records to read
    unreadable: dict[str, str] = {}  # --fleet: a route whose reads fail (throttled, denied) is marked, the others reported
    try:
        if fleet:
            records, health = [], []
            for name in route:
                try:
                    mine = records_in(store, [name], start, now)
                    health.append(route_health(store, name, now, spec, rpo_window).to_json(spec))
                except Exception as exc:
                    unreadable[name] = explain(exc)
                    continue
                records += mine
            if route and len(unreadable) == len(route):  # no route answered: the store, not a route
                raise StoreUnavailable(unreadable[route[0]])
            outside = outside_window(store, [r for r in route if r not in unreadable], records, start, now)
        else:
            records = records_in(store, route, start, now)
            health = [route_health(store, r, now, spec, rpo_window).to_json(spec) for r in route]
            outside = outside_window(store, route, records, start, now)
    except Exception as exc:
        fail(f"latency store {table!r}: {explain(exc)}", INFRASTRUCTURE)
    verdicts = [judge_health(h, [x for x in records if x.route == h["route"]], target_seconds=target, rpo_window_seconds=rpo_window, now=now)
                for h in health]
    code = combine(Exit.from_verdict(v.verdict) for v in verdicts)
    summaries = summarize(records)
    counts = within_counts(records, target)
    chart_files: list[str] = []
    if charts:
        from replmon.local.latency_chart import latency_chart, latency_over_time

        stamp = iso_ms(now).replace(":", "").replace("-", "").split(".")[0] + "Z"
        names = "-".join(route) if len("-".join(route)) <= 60 else f"{len(route)}-routes"
        over = latency_over_time(records, charts / f"report-{names}-{stamp}-latency-over-time.png",
                                 f"replmon report: {', '.join(route)}, last {hours:g} h, target {target:g} s",
                                 target_seconds=target, window=(start, now), rpo_window_seconds=rpo_window)
        vs = latency_chart(records, charts / f"report-{names}-{stamp}-latency-vs-size.png",
                           f"replmon report: {', '.join(route)}, last {hours:g} h", target_seconds=target)
        chart_files = [str(over), str(vs)]
    doc = envelope("report", verdicts, code, target, faults=outside,
                   window={"start_at": iso_ms(start), "end_at": iso_ms(now), "hours": hours},
                   probes=len(records), summaries=[summary_json(s, counts) for s in summaries],
                   health=[health_output(h) for h in health], chart_files=chart_files)
    if fleet:
        from replmon.fleet.risk import COLUMNS, fleet_rows, invalid_verdicts

        # an invalid item: no data (exit 4, a configuration to fix, not a breach); a route or group unread: not measured (3)
        by_route = {v.route: str(v.verdict) for v in verdicts} | invalid_verdicts(registry_rows) | dict.fromkeys(unreadable, "not_measured")
        for r in registry_rows:
            if str(r["route"]) in unreadable:
                r["reason_code"], r["reason"] = "READ_FAILED", unreadable[str(r["route"])]
        rows_f = fleet_rows(registry_rows, {h["route"]: h for h in doc["health"]}, by_route, doc["summaries"], target_seconds=target)
        doc["fleet"] = rows_f
        from replmon.signals.verdict import PRECEDENCE as URGENCY

        # a route listed and not measured (mode off: not enrolled, superseded) is shown, not judged: a fleet
        # with discovered buckets nobody enrolled would otherwise never exit 0
        off = {str(r["route"]) for r in registry_rows if r["mode"] == "off"}
        judged = {name: v for name, v in by_route.items() if name not in off}
        code = combine(Exit.from_verdict(v) for v in judged.values()) if judged else int(Exit.NO_DATA)
        doc["exit_code"], doc["verdict"] = code, next((str(v) for v in URGENCY if str(v) in judged.values()), "no_data")
        if fmt is Format.table:  # one line for the fleet, then the table (a headline per route would repeat it)
            tally = {v: sum(1 for r in rows_f if r["verdict"] == v) for v in ("breach", "not_measured", "no_data", "ok")}
            out.print(f"fleet: {len(rows_f)} routes: "
                      + ", ".join(f"{n} {v.replace('_', ' ')}" for v, n in tally.items()), highlight=False)
            emit(rows_f, fmt, f"fleet: {len(rows_f)} routes, riskiest first (last {hours:g} h; RPO now, SLO {slo_target_percent:g} % "
                 f"within {target:g} s over {spec.period_days} days)", columns=list(COLUMNS))
        else:
            emit(rows_f if fmt is Format.csv else [], fmt, document=None if fmt is Format.csv else doc, columns=list(COLUMNS))
        for f in chart_files:
            err.print(f"chart: {f}", highlight=False)
        return code
    print_headline(verdicts, fmt, counted=f"last {hours:g} h")
    if fmt is Format.json:
        emit([], fmt, document=doc)
    elif fmt is Format.csv:
        emit(doc["summaries"], fmt, columns=list(doc["summaries"][0]) if doc["summaries"] else ["route", "size_class"])
    else:
        rows, columns = summary_rows(summaries, counts, wide=wide, one_route=len(route) == 1)
        title = (f"route {route[0]}: " if len(route) == 1 else "") + f"{len(records)} probes in the last {hours:g} h"
        if rows:
            emit(rows, fmt, title, columns=columns, footnotes=footnotes(summaries))
        else:
            out.print(f"{title}: none", highlight=False)
        hrows = [health_row(h, wide) for h in doc["health"]]
        print_table(hrows, list(hrows[0]), f"RPO (last {duration(rpo_window)}), SLO ({slo_target_percent:g} % within "
                    f"{target:g} s over {spec.period_days} days)")
    for f in chart_files:
        err.print(f"chart: {f}", highlight=False)
    for line in outside:  # records a skewed prober stamped just outside the window: said, never silently NO DATA
        err.print(line, highlight=False, soft_wrap=True)
    return code


#: How far past each edge of its window `report` looks for records a skewed prober's clock stamped.
OUTSIDE_SECONDS = 3600.0


def outside_window(store: Any, routes: list[str], inside: list[Any], start: float, now: float) -> list[str]:
    """One warning line per route with records just outside the window: dated after now (past the
    30 s core/skew.py allows: the prober's clock is ahead), or, for a route with none inside it,
    dated in the hour (or one window length, if longer) before it (behind, a schedule that stopped
    just before, or a window mistyped too short)."""
    from replmon.core.skew import WARN_SECONDS
    from replmon.probe.latency_report import records_in
    from replmon.signals.verdict import duration

    lines = []
    for route in routes:
        ahead = [r for r in records_in(store, [route], now, now + OUTSIDE_SECONDS) if r.planned_at > now + WARN_SECONDS]
        if ahead:
            most = max(r.planned_at for r in ahead) - now
            lines.append(f"route {route}: {len(ahead)} record(s) dated up to {duration(most)} after now, outside this report's "
                         "window: the prober's clock is ahead of this machine's (clock skew; `replmon probe` names it past 30 s)")
        if not any(r.route == route for r in inside):
            before = records_in(store, [route], start - max(OUTSIDE_SECONDS, now - start), start)
            if before:
                gap = start - max(r.planned_at for r in before)
                lines.append(f"route {route}: no record in the window, but {len(before)} dated {duration(gap)} before it: a prober "
                             "clock behind this machine's, or probes that stopped just before (a wider --hours includes them)")
    return lines


def health_row(h: dict[str, object], wide: bool) -> dict[str, object]:
    """One route's RPO and SLO (signals/health.py health_output) as a table row; ``wide`` adds burn rates,
    pending bytes and events."""
    slo = h["slo"]
    assert isinstance(slo, dict)
    burn = {b["window"]: b["rate"] for b in slo["burn_rates"]}
    row: dict[str, object] = {
        "route": h["route"],
        "RPO s": "unbounded" if h["rpo_unbounded"] else h["rpo_seconds"],
        "SLO probes": f"{slo['good_probes']}/{slo['judged_probes']}",
        "attainment %": slo["attainment_percent"], "budget left %": slo["budget_left_percent"],
        "alerts": ",".join(k for k, v in slo["alerts"].items() if v) or "-",
    }
    if wide:
        inputs = h["rpo_inputs"]
        assert isinstance(inputs, dict)
        row.update({f"burn {w}": v for w, v in burn.items()})
        events = h["events"]
        assert isinstance(events, list)
        row.update({"pending bytes": inputs["rtc_bytes_pending_bytes"], "events": sum(e["count"] for e in events),
                    "why unbounded": "; ".join(h["rpo_unbounded_reasons"]) or "-"})  # type: ignore[arg-type]
    return row
