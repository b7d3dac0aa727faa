"""`replmon fio ...`: read fio results the way IngestFioResults does, and show the presets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from replmon.cli.common import OK, USAGE, fail
from replmon.cli.render import FORMAT_HELP, Format, emit

fio_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Mount throughput baselines: fio results, presets and knees.")


def _read(path: Path) -> str:
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not text; give fio's --output-format=json output")


@fio_app.command("parse")
def parse(
    file: Annotated[Path, typer.Argument(help="fio's JSON output (json or json+; '-' reads stdin).")],
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """One row per job (or group) and direction, in bytes/s, IOPS and seconds: the ingest Lambda's parser."""
    from replmon.mounts.fioresult import FioResultError, parse_text

    try:
        rows = parse_text(_read(file), str(file))
    except FioResultError as exc:
        fail(str(exc), USAGE)
    if fmt is Format.table:
        emit([{"job": r.job, "group": r.group, "dir": r.direction, "MiB/s": f"{r.mib_s:.2f}", "IOPS": f"{r.iops:.1f}",
               "runtime s": f"{r.runtime_s:.3f}", "clat p50 ms": _ms(r.clat_p50_s), "clat p99 ms": _ms(r.clat_p99_s),
               "clat p99.9 ms": _ms(r.clat_p999_s), "error": r.error} for r in rows], fmt, f"{file}: {len(rows)} rows")
    else:
        emit([r.to_json() for r in rows], fmt)
    return OK


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.3f}"


@fio_app.command("presets")
def presets(
    kind: Annotated[str, typer.Option(help="Target kind the jobs are expanded for.")] = "mountpoint",
    scale: Annotated[str, typer.Option(help="full, small or tiny.")] = "full",
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Each preset, the study it reproduces, and its jobs for a target kind (skipped jobs say why)."""
    from replmon.mounts import presets as p

    rows = []
    for name in p.names():
        try:
            plan = p.expand(name, kind, scale)
        except p.PresetError as exc:
            fail(f"--kind/--scale: {exc}")
        spec = p.raw(name)
        rows.append({"preset": name, "reference": spec["reference"], "study": spec["study"], "jobs": len(plan.jobs),
                     "dd steps": len(plan.dd), "skipped": "; ".join(f"{s.job}: {s.reason}" for s in plan.skipped) or "-"})
    emit(rows, fmt, f"presets for a {kind} target at scale {scale}")
    return OK


@fio_app.command("jobfile")
def jobfile(
    preset: Annotated[str, typer.Argument(help="A preset name (replmon fio presets).")],
    kind: Annotated[str, typer.Option(help="Target kind.")] = "mountpoint",
    scale: Annotated[str, typer.Option(help="full, small or tiny.")] = "full",
    directory: Annotated[str, typer.Option(help="fio's directory= (the mount).")] = "/mnt/target/replmon-fio/RUN",
) -> int:
    """Print the fio job file the runner would run (the layout it writes first is in comments)."""
    from replmon.mounts import presets as p

    try:
        plan = p.expand(preset, kind, scale)
    except p.PresetError as exc:
        fail(str(exc))
    for f in plan.layout:
        sys.stdout.write(f"; layout {f.path} {f.size} bytes\n")
    for s in plan.skipped:
        sys.stdout.write(f"; skipped {s.job}: {s.reason}\n")
    sys.stdout.write(plan.jobfile(directory))
    return OK


@fio_app.command("knee")
def knee(
    logs: Annotated[list[Path], typer.Argument(help="fio bandwidth logs (write_bw_log with log_avg_msec=1000; several jobs' logs add up).")],
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Burst level, sustained level and when the change happened, per direction (none for a flat log)."""
    from replmon.mounts import knee as k
    from replmon.mounts.fioresult import FioResultError

    samples = []
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
