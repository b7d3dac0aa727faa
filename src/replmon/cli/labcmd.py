"""`replmon lab ...`: the local lab (run, bench, bench-mounts, chaos, fio), its own command group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from replmon.cli.common import EXIT_CODES_HELP, INFRASTRUCTURE, USAGE, check_output_file, config_message, exit_code, fail
from replmon.cli.render import FORMAT_HELP, Format, emit, err, out, progress_bar, summary_rows, write_data
from replmon.core.errors import ConfigError

lab_app = typer.Typer(no_args_is_help=True, help="The local lab: two MinIO servers with real replication, DynamoDB Local.")

#: MinIO refuses a replication bandwidth limit below this (mc replicate add --bandwidth).
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


@lab_app.command("run", epilog=EXIT_CODES_HELP)
def lab_run(
    sizes: Annotated[str, typer.Option(help="Preset name or comma-separated sizes (1MiB,64MiB,...).")] = "lab-ladder",
    trials: Annotated[int | None, typer.Option(help="Trials per size (default: the preset's).")] = None,
    bandwidth: Annotated[str, typer.Option(help="MinIO replication bandwidth limit (100MiB is MinIO's minimum).")] = "100MiB",
    resolution: Annotated[float, typer.Option(help="Polling floor in seconds (AWS default 1.0; the lab can afford finer).")] = 0.1,
    timeout: Annotated[int, typer.Option(help="Seconds a probe may take from its upload's start before it is STUCK.")] = 600,
    history: Annotated[bool, typer.Option(help="Let earlier runs' throughput skip early HEADs (off: every run polls from the start).")] = False,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The lab's directory (servers' data, logs, chart, records); the lab's alone.")] = Path("lab-data"),
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Start the lab, run a probe ladder through the real state machine, print the table, draw the chart."""
    from replmon.core.stats import summarize
    from replmon.lab.lab import Lab, planned_route
    from replmon.lab.servers import LabError
    from replmon.local.execution import run_request
    from replmon.local.latency_chart import latency_chart
    from replmon.probe.plan import check_fits
    from replmon.probe.request import load_settings

    bandwidth = check_bandwidth(bandwidth)
    flags = {"sizes": sizes, "timeout_seconds": timeout, "max_concurrency": 1, "poll": {"floor_seconds": resolution, "use_history": history},
             **({"trials": trials} if trials is not None else {})}
    try:  # bad flags fail before any server starts
        settings = load_settings(flags)
        check_fits(settings.for_routes([planned_route("lab")]))
    except ConfigError as exc:
        fail(config_message(exc))
    try:
        with Lab(lab_dir, bandwidth=bandwidth) as lab:
            err.print(f"lab up: source {lab.servers['source'].url}, destination {lab.servers['destination'].url} "
                      f"(replication limit {bandwidth}/s), DynamoDB Local {lab.servers['dynamodb'].url}", highlight=False)
            with progress_bar() as bar:
                task = bar.add_task("probes", total=None)
                result = run_request(settings.for_routes([lab.route()]), lab.deps(),
                                     on_progress=lambda n, total: bar.update(task, completed=n, total=total), function_deps=lab.function_deps())
            left = lab.leftovers()
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    records = result.records
    rows = summary_rows(summarize(records))
    chart = latency_chart(records, lab_dir / "latency-vs-size.png", f"replmon lab: MinIO -> MinIO at {bandwidth}/s, run {result.run_id}")
    data = write_data(records, lab_dir / "runs" / f"{result.run_id}.json")
    leftover = sum(len(v) for v in left.values())
    code = exit_code(records, result.planned, result.execution.status == "SUCCEEDED" and not result.failed_iterations
                     and not result.skipped)
    if leftover:
        code = max(code, INFRASTRUCTURE)
    if fmt is Format.json:
        emit(rows, fmt, document={"run_id": result.run_id, "seconds": round(result.seconds, 1), "exit_code": code,
                                  "summaries": rows, "left_behind": left, "records": [r.to_item() for r in records]})
    else:
        emit(rows, fmt, f"run {result.run_id}: {len(records)} probes in {result.seconds:.0f} s")
    notes = (f"chart: {chart}\nrecords: {data} (and DynamoDB Local under {lab_dir / 'dynamodb'}, kept between runs)\n"
             f"left behind: {leftover} probe objects/versions/uploads" + ("" if not leftover else f" {left}"))
    (out if fmt is Format.table else err).print(notes, highlight=False)
    return code


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
    events: Annotated[int, typer.Option(min=10, max=1_000_000, help="Events sent through IngestEvents (batches of 10).")] = 10_000,
    hour_events: Annotated[int, typer.Option(min=10, max=1_000_000, help="Events in the hour the collector then reads.")] = 100_000,
    concurrency: Annotated[int, typer.Option(min=2, max=1000, help="Concurrent IngestEvents (EventsMaxConcurrency).")] = 5,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The bench's directory (DynamoDB Local's data).")] = Path("lab-data/bench-ingest"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-INGEST.md"),
) -> int:
    """P6 event ingestion (issue 19.6): events/s into DynamoDB Local through the real handler, the
    modelled first throttle per partition key, the collector's time with a large hour."""
    from replmon.lab.bench import run_ingest_bench
    from replmon.lab.servers import LabError

    check_output_file(output, "--output")
    if hour_events < events:
        fail("--hour-events: at least --events (the ingested events are part of the hour)")
    try:
        run_ingest_bench(out, lab_dir, output, ingest_events=events, hour_events=hour_events, concurrency=concurrency)
    except LabError as exc:
        fail(str(exc), INFRASTRUCTURE)
    return 0


@lab_app.command("bench-mounts")
def lab_bench_mounts(
    reps: Annotated[int, typer.Option(min=1, max=10, help="M1: alternating repetitions of runner and bare fio.")] = 4,
    rtt_ms: Annotated[int, typer.Option(min=2, max=1000, help="M3: the round trip Toxiproxy adds, ms (145: Ohio - Tokyo).")] = 145,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The bench's directory.")] = Path("lab-data/bench-mounts"),
    output: Annotated[Path, typer.Option(help="Where the generated report goes.")] = Path("docs/BENCH-MOUNTS.md"),
) -> int:
    """M1 runner overhead vs bare fio, M2 lab Mountpoint vs s3fs sequential reads, M3 the drop under
    an added round trip; writes docs/BENCH-MOUNTS.md."""
    from replmon.lab.mountbench import run_mount_bench
    from replmon.lab.servers import LabError

    check_output_file(output, "--output")
    try:
        run_mount_bench(out, lab_dir, output, reps=reps, rtt_ms=rtt_ms)
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith("--dir") else INFRASTRUCTURE)
    return 0


@lab_app.command("chaos")
def lab_chaos(
    fault: Annotated[str, typer.Option(help="latency (4 s per answer), bandwidth (256 KB/s), hang (no data until healed) or reset (connections reset).")] = "latency",
    target: Annotated[float, typer.Option(min=0.1, help="The latency target (RPO alarm threshold and SLO threshold), seconds.")] = 2.0,
    probes: Annotated[int, typer.Option(min=1, max=20, help="Probes per phase.")] = 3,
    sizes: Annotated[str, typer.Option(help="Probe sizes.")] = "1MiB",
    timeout: Annotated[int, typer.Option(min=5, help="Seconds a probe may take before it is STUCK.")] = 30,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The lab's directory.")] = Path("lab-data/chaos"),
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Baseline, fault, healed: probes through the real state machine while Toxiproxy breaks the
    replication path; each phase's RPO, SLO burn and alert state with the alarms' thresholds.
    Exit 0 when the fault breached and the healed route recovered, 1 otherwise."""
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
    rows = [p.row() for p in phases]
    ok = not phases[0].breached and phases[1].breached and not phases[2].breached
    emit(rows, fmt, f"lab chaos: {fault}, target {target:g} s, thresholds from template.yaml", document={
        "fault": fault, "target_seconds": target, "breached_and_recovered": ok,
        "phases": [{**p.row(), "seconds": p.seconds, "health": p.health, "notes": p.notes} for p in phases],
        "left_behind": left})
    if fmt is Format.table:
        out.print("breached under the fault and recovered after healing" if ok else "did NOT breach and recover as expected", highlight=False)
    return 0 if ok else 1


@lab_app.command("fio")
def lab_fio(
    preset: Annotated[str, typer.Option(help="A mount preset (replmon fio presets).")] = "mountpoint-xregion",
    scale: Annotated[str, typer.Option(help="full, small (1/64 of sizes and run times) or tiny (1/1024).")] = "small",
    target: Annotated[list[str] | None, typer.Option(help="mountpoint, mountpoint-cache, mountpoint-xregion, mountpoint-credits, s3fs, local "
                                                          "(repeat; default: all, mountpoint-credits only for the burst presets).")] = None,
    rtt_ms: Annotated[int, typer.Option(min=2, max=1000, help="mountpoint-xregion: the round trip Toxiproxy adds (half each way), ms; "
                                                              "145 is about Ohio - Tokyo, the study's pair.")] = 145,
    throttle_after: Annotated[float, typer.Option(min=1, help="mountpoint-credits: seconds into the run before the cap (the burst).")] = 5.0,
    throttle_mibps: Annotated[int, typer.Option(min=1, help="mountpoint-credits: the cap per connection, MiB/s (Toxiproxy bandwidth).")] = 8,
    lab_dir: Annotated[Path, typer.Option("--dir", help="The lab's directory.")] = Path("lab-data/fio"),
    chart: Annotated[Path | None, typer.Option(help="PNG chart (default: <dir>/<preset>.png).")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write this preset's report into a generated Markdown file (e.g. docs/LAB-MOUNTS.md).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """A preset through the real fio runner on Mountpoint's own file-system code, s3fs and a local
    directory (and Mountpoint behind Toxiproxy's added round trip); stores the results in the lab's
    DynamoDB Local as IngestFioResults does, prints the study-shaped table, writes a chart.
    Exit 0 when every target's run succeeded and left nothing mounted."""
    from replmon.cli.fio import print_report
    from replmon.lab.lab import Lab
    from replmon.lab.mounts import LAB_TARGETS, charts, default_targets, markdown_section, report, run_lab_fio, summary, write_markdown
    from replmon.lab.servers import LabError
    from replmon.mounts import presets as p

    try:
        p.expand(preset, "mountpoint", scale)
    except p.PresetError as exc:
        fail(f"--preset/--scale: {exc}")
    targets = target or default_targets(preset)
    bad = [t for t in targets if t not in LAB_TARGETS]
    if bad:
        fail(f"--target {bad[0]!r}: use any of {', '.join(LAB_TARGETS)}")
    try:
        with Lab(lab_dir, events=False, least_privilege=False) as lab:
            runs = run_lab_fio(lab, preset, scale, targets, rtt_ms=rtt_ms, throttle_after=throttle_after, throttle_mibps=throttle_mibps,
                               progress=lambda m: err.print(m, highlight=False))
    except LabError as exc:
        fail(str(exc), USAGE if str(exc).startswith(("--dir", "--target")) else INFRASTRUCTURE)
    rep = report(preset, runs)
    png = charts(preset, runs, chart or lab_dir / f"{preset}.png")
    print_report(rep, fmt, title=f"lab fio: {preset} at scale {scale}", document={
        "scale": scale, "rtt_ms": rtt_ms, "throttle": {"after_s": throttle_after, "mibps_per_connection": throttle_mibps},
        "runs": summary(runs), "chart": str(png)})
    if fmt is Format.table:
        emit(summary(runs), fmt, "runs (stored in the lab's DynamoDB Local)")
        drop = rep.comparisons.get("cross_region_drop")
        if drop and drop["mean"] is not None:
            out.print(f"Toxiproxy +{rtt_ms} ms round trip: mean drop {drop['mean']:.0%} over the jobs vs the plain mount "
                      "(study R2: ~70 % lower, Ohio -> Tokyo vs Tokyo -> Tokyo; qualitative: loopback has no bandwidth limit)",
                      highlight=False)
        out.print(f"chart: {png}", highlight=False)
    if markdown:
        command = f"replmon lab fio --preset {preset} --scale {scale}" + "".join(f" --target {t}" for t in targets) + \
            (f" --rtt-ms {rtt_ms}" if "mountpoint-xregion" in targets else "") + \
            (f" --throttle-after {throttle_after:g} --throttle-mibps {throttle_mibps}" if "mountpoint-credits" in targets else "")
        err.print(f"wrote {write_markdown(markdown, preset, markdown_section(preset, scale, rep, runs, command))}", highlight=False)
    return 0 if all(r.result.exit_code == 0 for r in runs) else 1
