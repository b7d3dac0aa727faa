"""`replmon cost`: what a probe schedule costs per month, modelled before anyone deploys it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from replmon.cli.common import OK, config_message, fail
from replmon.cli.render import FORMAT_HELP, Format, emit, err
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError


def cost(
    sizes: Annotated[str, typer.Option(help="Preset name or comma-separated sizes.")] = DEFAULTS.sizes,
    trials: Annotated[int | None, typer.Option(help="Trials per size (default: the preset's, else 1).")] = None,
    rate_minutes: Annotated[float, typer.Option(min=1, help="One run every N minutes (the schedule).")] = DEFAULTS.schedule_rate_minutes,
    destinations: Annotated[int, typer.Option(min=1, max=10, help="Replication destinations of the route.")] = 1,
    cross_region: Annotated[bool, typer.Option(help="Destinations in another region: inter-region transfer per GB.")] = False,
    source_region: Annotated[str | None, typer.Option(help="The source bucket's Region: inter-Region transfer is billed at the "
                                                      "source's rate (default: pricing.json's Region).")] = None,
    rtc: Annotated[bool, typer.Option(help="The rule has Replication Time Control (the demo pair's does): its fee per GB.")] = True,
    history: Annotated[bool, typer.Option(help="Probes read the route's history (a DynamoDB Query each).")] = True,
    max_concurrency: Annotated[int, typer.Option(min=1, max=1000, help="Probes in flight at once (the run's duration).")]
    = DEFAULTS.max_concurrency,
    replication_mib_per_s: Annotated[float | None, typer.Option(min=0.001, help="Modelled replication throughput (pricing.json's assumption otherwise).")] = None,
    mount_preset: Annotated[str | None, typer.Option(help="Instead: one run of this mount preset's cross-region reads (replmon fio cost).")] = None,
    bucket_region: Annotated[str, typer.Option(help="With --mount-preset: the bucket's region (its transfer rate).")] = "ap-northeast-1",
    routes: Annotated[str | None, typer.Option(metavar="N[,N...]", help="Instead: the fleet's cost for N routes (e.g. 1,10,100,1000) "
                                               "on --probe-classes, with the cost per route.")] = None,
    probe_classes: Annotated[str, typer.Option(metavar="CLASSES", help="With --routes: the fleet's ProbeClasses.")] = DEFAULTS.probe_classes,
    route_groups: Annotated[int, typer.Option(min=1, max=8, help="With --routes: RouteGroups.")] = 1,
    heartbeat_seconds: Annotated[int, typer.Option(min=0, max=3600, help="With --routes: HeartbeatSeconds (0: Heartbeats disabled).")]
    = DEFAULTS.heartbeat_seconds,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Monthly cost of a schedule: Step Functions, Lambda, S3 requests, the RTC fee and transfer,
    DynamoDB, CloudWatch. Modelled from the same plan and polling policy the probes use; prices
    from pricing.json (list prices, us-east-1, dated; free tiers not applied)."""
    if mount_preset:  # mount baselines price their own reads (replmon.mounts.read_cost)
        from replmon.cli.fio import print_cost

        return print_cost(mount_preset, bucket_region, "full", False, 30 * 24 * 60 / rate_minutes, fmt)
    if routes is not None:
        return _fleet_cost(routes, probe_classes, route_groups, cross_region, rtc, source_region, fmt, heartbeat_seconds)
    from replmon.cost.estimate import estimate, pricing
    from replmon.local.template import TEMPLATE, load_template
    from replmon.probe.request import load_request

    payload: dict[str, Any] = {"routes": [{"name": "r", "source": {"bucket": "src-bucket"},
                                 "destinations": [{"bucket": f"dst-bucket-{i}"} for i in range(destinations)]}],
                     "sizes": sizes, "poll": {"use_history": history}, "max_concurrency": max_concurrency}
    if trials is not None:
        payload["trials"] = trials
    try:
        request = load_request(payload)
    except ConfigError as exc:
        fail(config_message(exc))
    runs = DEFAULTS_MONTH_MINUTES / rate_minutes
    # Mount baselines are their own stack (templates/mount-baselines.yaml): not priced here.
    resources = load_template(TEMPLATE)["Resources"].values()
    # Standard alarms, plus the fleet's Metrics Insights alarms of one RouteGroup (RouteGroups=1): AWS
    # prices those per metric analyzed (CloudWatch pricing; rate unconfirmed), one per route here, at
    # the standard alarm's rate. Group g01.. alarms exist only with RouteGroups > 1.
    def one_group(condition: str) -> bool:  # exists with RouteGroups = 1 (HeartbeatsG01.. need a second group)
        return not condition.startswith("HasGroup") and not (condition.startswith("HeartbeatsG") and condition != "HeartbeatsG00")

    alarms = sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::Alarm" and one_group(str(r.get("Condition", ""))))
    extra: dict[str, float] = {"composite_alarms": sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::CompositeAlarm")}
    if replication_mib_per_s:
        extra["replication_mib_per_s"] = replication_mib_per_s
    try:
        est = estimate(request, runs, cross_region, rtc, extra, alarms=alarms, source_region=source_region)
        # one more run: what a single on-demand invoke adds to the month (the fixed items cancel out)
        per_run = estimate(request, 1, cross_region, rtc, extra, alarms=alarms, source_region=source_region).total - estimate(
            request, 0, cross_region, rtc, extra, alarms=alarms, source_region=source_region).total
    except ConfigError as exc:
        fail(str(exc))  # one line that names --source-region
    total = round(est.total, 2)
    data = [{"item": x.item, "quantity": round(x.quantity, 3), "unit": x.unit, "usd_per_month": round(x.dollars, 2),
             "share_percent": round(100 * x.dollars / est.total, 1) if est.total else None} for x in est.lines]
    data.append({"item": "total", "quantity": round(runs, 3), "unit": f"runs of {est.probes_per_run} probe(s)", "usd_per_month": total,
                 "share_percent": 100.0})
    doc = {"schema_version": 1, "command": "cost", "modelled": True, "region": est.region, "prices_as_of": est.as_of,
           "runs_per_month": runs, "probes_per_run": est.probes_per_run, "total_usd_per_month": total,
           "usd_per_run": round(per_run, 2), "run_seconds": round(est.run_seconds, 1),
           "replicated_gib_per_run": round(est.replicated_gib_per_run, 1),
           "transfer_source_region": est.transfer_source_region, "transfer_rate_per_gb": est.transfer_rate_per_gb,
           "lines": data[:-1], "assumptions": est.assumptions, "sources": pricing()["sources"]}
    if fmt is Format.table:  # for people: quantity and unit in one readable cell
        rows = [{"item": d["item"], "per month": f"{d['quantity']:,.1f} {d['unit']}" if d["item"] != "total" else f"{runs:,.0f} {d['unit']}",
                 "$ per month": f"{d['usd_per_month']:,.2f}", "share": "-" if d["share_percent"] is None else f"{d['share_percent']:.0f}%"} for d in data]
        emit(rows, fmt, f"replmon cost (modelled; {est.region} list prices of {est.as_of}, free tiers not applied)")
        err.print(f"one run: {est.probes_per_run} probes, {est.replicated_gib_per_run:,.1f} GiB replicated, ${per_run:,.2f}, "
                  f"about {est.run_seconds / 3600:.1f} h at max_concurrency {max_concurrency} (modelled)", highlight=False)
        err.print("assumptions (modelled, pricing.json): " + ", ".join(f"{k}={v}" for k, v in est.assumptions.items()), highlight=False)
    else:
        emit(data, fmt, document=doc)
    return OK


DEFAULTS_MONTH_MINUTES = 30 * 24 * 60  # pricing.json's days_per_month, in minutes


def _fleet_cost(routes: str, probe_classes: str, route_groups: int, cross_region: bool, rtc: bool, source_region: str | None,
                fmt: Format, heartbeat_seconds: int) -> int:
    """``--routes``: the fleet's monthly cost for each N, per route and marginal (cost/fleet.py)."""
    from replmon.core.cadence import ProbeClasses
    from replmon.cost.estimate import pricing
    from replmon.cost.fleet import HEARTBEAT_PREFIX, fleet_estimate, stall_metric_and_alarm
    from replmon.fleet.alarms import FLEET_ALARMS
    from replmon.local.template import TEMPLATE, load_template

    try:
        counts = sorted({int(x) for x in routes.split(",") if x.strip()})
    except ValueError:
        fail(f"--routes: {routes!r} is not a comma-separated list of route counts, e.g. 1,10,100,1000")
    if not counts or counts[0] < 1 or counts[-1] > 4000:
        fail(f"--routes: {routes!r}: each count from 1 to 4000 (8 route groups of 500), e.g. 1,10,100,1000")
    try:
        classes = ProbeClasses.parse(probe_classes, "--probe-classes")
    except ConfigError as exc:
        fail(config_message(exc))
    template_resources = load_template(TEMPLATE)["Resources"]
    resources = list(template_resources.values())
    alarms = [k for k, r in template_resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"
              and not str(r.get("Condition", "")).startswith("HasGroup") and not k.startswith("HeartbeatRunG")]
    # the g00 Metrics Insights alarms carry no condition: priced per route instead; HeartbeatRun: one per group (fleet_estimate)
    standard = len(alarms) - len(FLEET_ALARMS)
    composite = sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::CompositeAlarm")
    try:
        ests = [fleet_estimate(n, classes, cross_region=cross_region, rtc=rtc, source_region=source_region, route_groups=route_groups,
                               standard_alarms=standard, composite_alarms=composite, heartbeat_seconds=heartbeat_seconds or None)
                for n in counts]
    except ConfigError as exc:
        fail(str(exc))
    rows = [{"routes": e.routes, "usd_per_month": round(e.total, 2), "usd_per_route_month": round(e.total / e.routes, 2),
             "marginal_usd_per_route_month": round(e.per_route, 2),
             "marginal_usd_per_route_month_range": [round(v, 2) for v in e.per_route_range]} for e in ests]
    last = ests[-1]
    doc = {"schema_version": 1, "command": "cost", "modelled": True, "region": last.region, "prices_as_of": last.as_of,
           "probe_classes": str(classes), "fleet": rows,
           "per_route_lines": [{"item": x.item, "quantity": round(x.quantity, 3), "unit": x.unit, "usd_per_month": round(x.dollars, 4)}
                               for x in last.per_route_lines],
           "fixed_lines": [{"item": x.item, "quantity": round(x.quantity, 3), "unit": x.unit, "usd_per_month": round(x.dollars, 2)}
                           for x in last.fixed_lines],
           # lines whose pricing basis AWS's page does not confirm: each basis, and the one assumed above
           "price_ranges": [r.to_json() for r in last.ranges],
           "assumptions": last.assumptions, "sources": pricing()["sources"]}
    if fmt is Format.json:
        emit([], fmt, document=doc)
    elif fmt is Format.csv:
        emit([{k: v for k, v in r.items() if not isinstance(v, list)} for r in rows], fmt)
    else:
        emit([{"routes": f"{r['routes']:,}", "$ per month": f"{r['usd_per_month']:,.2f}", "$ per route": f"{r['usd_per_route_month']:,.2f}",
               "marginal $ per route": f"{r['marginal_usd_per_route_month']:,.2f}"} for r in rows], fmt,
             f"replmon cost --routes (modelled; {last.region} list prices of {last.as_of}; classes {classes})")
        emit([{"per route, per month": x.item, "quantity": f"{x.quantity:,.1f} {x.unit}", "$": f"{x.dollars:,.3f}"}
              for x in last.per_route_lines], fmt, "what one route adds")
        beats = [x for x in last.per_route_lines if x.item.startswith(HEARTBEAT_PREFIX)]
        if beats:
            own = sum(x.dollars for x in beats)
            shares = stall_metric_and_alarm(last)
            err.print(f"heartbeats (every {heartbeat_seconds} s): ${own:.2f} per route a month in S3, DynamoDB and logs, "
                      f"${own + shares:.2f} with the StallSeconds metric and what RouteStalled analyzes (goal: under $1); "
                      f"the probe schedule ({classes}) ${last.per_route - own - shares:.2f}; the Heartbeat function "
                      f"${next(x.dollars for x in last.fixed_lines if x.item.startswith('Heartbeat')):.2f} per RouteGroup", highlight=False)
        lo, hi = last.per_route_range
        for r in last.ranges:
            other = next(b for b in r.bases if b != r.assumed)
            err.print(f"{r.item.split(' (')[0]}: ${r.bases[r.assumed]:.2f} per route a month on the assumed basis ({r.assumed}), "
                      f"${r.bases[other]:.2f} on {other}; AWS's pricing page does not say which (pricing.json cloudwatch_mi_alarms). "
                      f"One route adds ${last.per_route:.2f} (${lo:.2f} to ${hi:.2f})", highlight=False)
        err.print("modelled: " + "; ".join(f"{k}={v}" for k, v in last.assumptions.items() if k != "metric_months_per_route"),
                  highlight=False)
    return OK
