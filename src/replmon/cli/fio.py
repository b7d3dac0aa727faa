"""`replmon fio ...`: read fio results the way IngestFioResults does, show the presets, check a
target list, rebuild a study's report from a deployed mount stack, price cross-region reads."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from replmon.cli.common import INFRASTRUCTURE, OK, USAGE, fail, read_capped
from replmon.cli.render import FORMAT_HELP, Format, emit, err, out

if TYPE_CHECKING:
    from replmon.mounts.report import StudyReport

fio_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Mount throughput baselines: fio results, presets, reports, knees and costs.")


#: The most read of one fio file: far past a json+ output or a per-second bandwidth log, so /dev/zero
#: or a wrong multi-GB file ends in one line, not in memory.
MAX_INPUT_BYTES = 256 * 2**20


def _read(path: Path) -> str:
    try:
        raw = read_capped(path, MAX_INPUT_BYTES)
        if len(raw) > MAX_INPUT_BYTES:
            fail(f"{path}: larger than {MAX_INPUT_BYTES // 2**20} MiB; is it fio's output (or a bandwidth log)?")
        return raw.decode("utf-8")
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not text; give fio's --output-format=json output")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.3f}"


@fio_app.command("parse")
def parse(
    file: Annotated[Path, typer.Argument(help="fio's JSON output (json or json+, also fio --client's; '-' reads stdin).")],
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """What ingestion stores: one row per job group and direction (threads and clients added up),
    in bytes/s, IOPS and seconds, with total-latency percentiles where fio measured them."""
    from replmon.mounts.document import fio_rows
    from replmon.mounts.fioresult import FioResultError, parse_text

    try:
        rows = fio_rows(parse_text(_read(file), str(file)))
    except FioResultError as exc:
        fail(str(exc), USAGE)
    if fmt is Format.table:
        emit([{"job": r.job, "dir": r.direction, "MiB/s": f"{r.bw_bytes / 2**20:.2f}", "IOPS": f"{r.iops or 0:.1f}",
               "runtime s": f"{r.runtime_s:.3f}", "entries": r.entries, "lat p50 ms": _ms(r.lat_p50_s), "lat p99 ms": _ms(r.lat_p99_s),
               "clat p50 ms": _ms(r.clat_p50_s), "clat p99 ms": _ms(r.clat_p99_s), "clat p99.9 ms": _ms(r.clat_p999_s),
               "error": r.error} for r in rows], fmt, f"{file}: {len(rows)} rows (one per job group and direction)")
    else:
        emit([r.to_json() for r in rows], fmt)
    return OK


@fio_app.command("presets")
def presets(
    kind: Annotated[str, typer.Option(help="Target kind the jobs are expanded for.")] = "mountpoint",
    scale: Annotated[str, typer.Option(help="full, small or tiny.")] = "full",
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Each preset, the study it reproduces, how it differs, and its jobs for a target kind (skipped jobs say why)."""
    from replmon.mounts import presets as p

    rows = []
    for name in p.names():
        try:
            plan = p.expand(name, kind, scale)
        except p.PresetError as exc:
            fail(f"--kind/--scale: {exc}")
        spec = p.raw(name)
        rows.append({"preset": name, "reference": spec["reference"], "study": spec["study"], "jobs": len(plan.jobs),
                     "dd steps": len(plan.dd), "layout GiB": f"{sum(f.size for f in plan.layout) / 2**30:.1f}",
                     "differs": spec.get("differs", "-"),
                     "skipped": "; ".join(f"{s.job}: {s.reason}" for s in plan.skipped) or "-"})
    emit(rows, fmt, f"presets for a {kind} target at scale {scale}")
    return OK


@fio_app.command("jobfile")
def jobfile(
    preset: Annotated[str, typer.Argument(help="A preset name (replmon fio presets).")],
    kind: Annotated[str, typer.Option(help="Target kind.")] = "mountpoint",
    scale: Annotated[str, typer.Option(help="full, small or tiny.")] = "full",
    directory: Annotated[str, typer.Option(help="fio's directory= (the run's directory on the mount).")] = "/mnt/target/replmon-fio/RUN",
) -> int:
    """Print the fio job file the runner would run (the layout it writes or reuses first is in comments)."""
    from replmon.mounts import presets as p

    try:
        plan = p.expand(preset, kind, scale)
    except p.PresetError as exc:
        fail(str(exc))
    layout_dir = directory.rsplit("/", 1)[0] + "/layout/" + plan.layout_set
    for f in plan.layout:
        sys.stdout.write(f"; layout {layout_dir}/{f.path} {f.size} bytes\n")
    for s in plan.skipped:
        sys.stdout.write(f"; skipped {s.job}: {s.reason}\n")
    for d in plan.dd:
        sys.stdout.write(f"; dd #{d.repetition} {' '.join(d.argv(directory))}\n")
    sys.stdout.write(plan.jobfile(directory, layout_dir))
    return OK


@fio_app.command("targets")
def targets(
    file: Annotated[Path, typer.Argument(help="The mount stack's Ec2Targets JSON list ('-' reads stdin).")],
    memory_mib: Annotated[int, typer.Option(help="The task's memory, MiB (the stack gives its default host, c6in.8xlarge, 57344; the 128 GiB hosts 114688).")] = 57344,
    scale: Annotated[str, typer.Option(help="The stack's Scale (a target may set its own).")] = "full",
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Check a target list as the runner will, before deploying it: each target, its preset, what it
    would skip (the target's semantics, and fio buffers that would not fit ``--memory-mib``)."""
    from replmon.mounts.memory import preflight
    from replmon.mounts.presets import PresetError, expand
    from replmon.mounts.runner import load_targets
    from replmon.mounts.targets import TargetError

    try:
        parsed = load_targets({"REPLMON_FIO_TARGETS": _read(file), "REPLMON_FIO_SCALE": scale})
    except (TargetError, PresetError) as exc:
        fail(str(exc))
    rows = []
    for t in parsed:
        plan = preflight(expand(str(t.preset), t.kind, t.scale or scale), memory_mib * 2**20, f"--memory-mib {memory_mib}")
        rows.append({"target": t.name, "kind": t.kind, "preset": t.preset, "scale": t.scale or scale,
                     "mount": " ".join(t.with_flags(plan.mount_flags).mount_argv() or ["(mounted by ECS)"]),
                     "jobs": len(plan.jobs), "skipped": "; ".join(f"{s.job}: {s.reason}" for s in plan.skipped) or "-"})
    emit(rows, fmt, f"{len(rows)} targets, run in this order, one at a time")
    return OK


@fio_app.command("knee")
def knee(
    logs: Annotated[list[Path], typer.Argument(help="fio bandwidth logs (write_bw_log; each job's log averaged per second, the logs summed).")],
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Burst level and how long it lasted, where the level fell and where the fall ended, the
    sustained level, per direction (none for a flat log)."""
    from replmon.mounts import knee as k
    from replmon.mounts.fioresult import FioResultError

    samples: list[k.Sample] = []
    try:
        for log in logs:
            samples += k.read_bw_log(_read(log), str(log))
    except FioResultError as exc:
        fail(str(exc))
    rows = [k.table_row(direction, entry) for direction, entry in k.by_direction(samples).items()]
    if not rows:
        fail("no samples in the logs: are they fio bandwidth logs (write_bw_log)?")
    emit(rows, fmt, "burst vs sustained")
    return OK


def print_report(rep: StudyReport, fmt: Format, title: str = "", document: Mapping[str, Any] | None = None) -> None:
    """A study report: one table after another (table/csv), or one JSON document."""
    if fmt is Format.json:
        emit([], fmt, document={**rep.to_json(), **(document or {})})
        return
    for t in rep.tables:
        if t.rows:
            emit(t.rows, fmt, f"{title + ': ' if title else ''}{t.title}")
            if t.note and fmt is Format.table:
                out.print(t.note, highlight=False)


def _stack(stack: str, region: str | None, profile: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(parameters, outputs) of a deployed mount stack."""
    from replmon.adapters import clients
    from replmon.adapters.explain import explain

    try:
        cfn = clients.client("cloudformation", clients.CONTROL, region=region, profile=profile)
        s = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    except Exception as exc:
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    return ({p["ParameterKey"]: p.get("ParameterValue", "") for p in s.get("Parameters", [])},
            {o["OutputKey"]: o["OutputValue"] for o in s.get("Outputs", [])})


def stack_targets(params: Mapping[str, str], preset: str) -> list[tuple[str, str]]:
    """(target, scale) of a mount stack's targets that run ``preset``: its Ec2Targets and its EFS target."""
    found = []
    try:
        for t in json.loads(params.get("Ec2Targets") or "[]"):
            if t.get("preset") == preset:
                found.append((t["name"], t.get("scale") or params.get("Scale", "full")))
    except (ValueError, TypeError, KeyError):
        fail("the stack's Ec2Targets parameter is not a JSON list of targets")
    if params.get("EfsFileSystemId") and params.get("EfsPreset") == preset:
        found.append(("efs", params.get("Scale", "full")))
    return found


@fio_app.command("report")
def report(
    preset: Annotated[str, typer.Option(help="The preset whose study to rebuild (replmon fio presets).")],
    stack_name: Annotated[str | None, typer.Option(help="A deployed mount stack: its table, and its targets that run --preset.")] = None,
    table: Annotated[str | None, typer.Option(help="The results table (the mount stack's output FioTableName).")] = None,
    mount: Annotated[list[str] | None, typer.Option("--mount", metavar="NAME", help="Mount target names (repeat; default: the stack's "
                                                    "targets running --preset).")] = None,
    scale: Annotated[str, typer.Option(help="Scale of the runs (with --mount).")] = "full",
    same_region: Annotated[str | None, typer.Option("--same-region-mount", metavar="NAME", help="mountpoint-xregion: the same-region "
                                                    "mount target (default: inferred from the bucket's and the task's region).")] = None,
    cross_region: Annotated[str | None, typer.Option("--cross-region-mount", metavar="NAME", help="mountpoint-xregion: the "
                                                     "cross-region mount target.")] = None,
    bucket_region: Annotated[str | None, typer.Option(help="mountpoint-xregion: price the cross-region target's reads at this region's rate.")] = None,
    charts: Annotated[Path | None, typer.Option(metavar="DIR", help="Write the study-shaped PNG chart here, named per report "
                                                "(fio-report-<preset>-<time>.png).")] = None,
    region: Annotated[str | None, typer.Option(help="AWS region of the stack / table.")] = None,
    profile: Annotated[str | None, typer.Option(help="AWS profile (the standard credential chain otherwise).")] = None,
    dynamodb_endpoint: Annotated[str | None, typer.Option(help="A DynamoDB-compatible endpoint (the lab's DynamoDB Local).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Rebuild a study's table (and chart) from the stored results of each target's latest run,
    with the published values in the same unit, the cross-region drop, the Express / Standard
    ratios, burst and sustained levels against the per-unit baseline."""
    from replmon.adapters.explain import explain
    from replmon.cli.common import check_output_dir, check_url
    from replmon.mounts import presets as p
    from replmon.mounts.ingest import partition
    from replmon.mounts.report import latest, study_report

    try:
        p.raw(preset)
    except p.PresetError as exc:
        fail(f"--preset: {exc}")
    check_url(dynamodb_endpoint, "--dynamodb-endpoint")
    check_output_dir(charts, "--charts")
    wanted = [(t, scale) for t in mount or []]
    if stack_name:
        params, outputs = _stack(stack_name, region, profile)
        table = table or outputs.get("FioTableName")
        wanted = wanted or stack_targets(params, preset)
    if not table:
        fail("--table or --stack-name: which results table? (the mount stack's output FioTableName)")
    if not wanted:
        fail(f"--mount: no mount target runs {preset} (name them with --mount, or check the stack's Ec2Targets)")
    from replmon.wiring import latency_table

    store = latency_table(table, endpoint_url=dynamodb_endpoint, region=region, profile=profile, call="read")
    results = []
    for name, sc in wanted:
        try:
            items = store.partition_items(partition(name, preset, sc))
        except Exception as exc:
            fail(f"results table {table!r}: {explain(exc)}", INFRASTRUCTURE)
        got = latest(items, name)
        if got is None:
            err.print(f"{name}: no {preset} run at scale {sc} in {table}", highlight=False)
        else:
            results.append(got)
    if not results:
        fail(f"no stored {preset} runs for {', '.join(n for n, _ in wanted)}", INFRASTRUCTURE)
    by = {r.target: r for r in results}
    pair = None
    if same_region or cross_region:
        if same_region not in by or cross_region not in by:
            fail("--same-region-mount and --cross-region-mount: name two mount targets that have runs")
        pair = (by[same_region], by[cross_region])
    rep = study_report(preset, results, xregion_pair=pair)
    drop = rep.comparisons.get("cross_region_drop")
    if drop and bucket_region:
        from replmon.mounts.read_cost import estimate

        far = by[drop["cross_region"]]
        measured = sum(int(i.get("io_bytes") or 0) for i in far.rows.values())
        try:
            est = estimate(preset, far.run.get("scale") or scale, bucket_region=bucket_region, read=measured)
        except p.PresetError as exc:
            fail(str(exc))
        rep.comparisons["cross_region_cost"] = {"read_gib": est.read_gib, "dollars": est.per_run, "bucket_region": bucket_region}
    doc: dict[str, Any] = {"table": table, "chart_files": []}
    if charts:
        from replmon.mounts.charts import chart as draw

        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        doc["chart_files"] = [str(draw(preset, results, charts / f"fio-report-{preset}-{stamp}.png"))]
    print_report(rep, fmt, preset, doc)
    if fmt is Format.table:
        if drop and drop.get("mean") is not None:
            out.print(f"cross-region drop ({drop['cross_region']} vs {drop['same_region']}): mean {drop['mean']:.0%} "
                      f"(published ~{drop['published']:.0%})", highlight=False)
        cost = rep.comparisons.get("cross_region_cost")
        if cost and drop:
            out.print(f"{drop['cross_region']}'s reads: {cost['read_gib']:.1f} GB across regions, ${cost['dollars']:.2f} at the "
                      f"{bucket_region} rate (modelled)", highlight=False)
        for f in doc["chart_files"]:
            out.print(f"chart: {f}", highlight=False)
    return OK


@fio_app.command("cost")
def cost(
    preset: Annotated[str, typer.Argument(help="A preset (replmon fio presets).")] = "mountpoint-xregion",
    bucket_region: Annotated[str, typer.Option(help="The bucket's region: its rate for transfer to another region.")] = "ap-northeast-1",
    scale: Annotated[str, typer.Option(help="full, small or tiny.")] = "full",
    nat: Annotated[bool, typer.Option(help="The client reaches S3 through a NAT gateway (processing per GB).")] = False,
    runs_per_month: Annotated[float, typer.Option(min=0, help="Scheduled runs a month.")] = 30,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """What one run of a mount preset's reads costs when the bucket is in another region (modelled)."""
    return print_cost(preset, bucket_region, scale, nat, runs_per_month, fmt)


def print_cost(preset: str, bucket_region: str, scale: str, nat: bool, runs_per_month: float, fmt: Format) -> int:
    from replmon.mounts.presets import PresetError
    from replmon.mounts.read_cost import estimate

    try:
        est = estimate(preset, scale, bucket_region=bucket_region, nat=nat, runs_per_month=runs_per_month)
    except PresetError as exc:
        fail(str(exc))
    rows = [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in line.items()} for line in est.lines]
    emit(rows, fmt, f"{preset} at scale {scale}: cross-region reads from a {bucket_region} bucket (modelled)",
         document={"modelled": True, "preset": preset, "scale": scale, "bucket_region": bucket_region, "read_gib": est.read_gib,
                   "layout_gib": est.layout_gib, "per_run_dollars": est.per_run, "lines": est.lines, "notes": est.notes})
    if fmt is Format.table:
        for n in est.notes:
            err.print(n, highlight=False)
    return OK
