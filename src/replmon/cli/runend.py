"""How a lab run ends, whatever happened: the table, the run file, the chart, the
leftover check and one line per fault; each file written whole or not at all, a file that could not
be written named with its cause (a full disk says "disk full"), never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replmon.core.files import disk_full
from replmon.core.names import PathEscape, contained
from replmon.core.record import ProbeRecord


def _why(exc: BaseException) -> str:
    return "disk full" if disk_full(exc) else f"{type(exc).__name__}: {exc}"


def write_run_files(records: list[ProbeRecord], lab_dir: Path, run_id: str, title: str,
                    target_seconds: float | None = None) -> tuple[Path | None, Path | None, list[str]]:
    """The run file (``<dir>/runs/<run id>.json``) and its chart (``<dir>/runs/<run id>-latency-vs-size.png``,
    with the target line); (run file, chart, fault lines).
    A run file that could not be written is a fault of its own ("could not record")."""
    from replmon.cli.render import write_data

    faults: list[str] = []
    data: Path | None = None
    try:
        data = write_data(records, contained(lab_dir, "runs", f"{run_id}.json"))
    except (OSError, PathEscape) as exc:
        faults.append(f"{_why(exc)}: run file {lab_dir / 'runs' / (run_id + '.json')} not written; "
                      f"the {len(records)} record(s) are in the table above")
    chart: Path | None = None
    try:
        from replmon.local.latency_chart import latency_chart

        chart = latency_chart(records, contained(lab_dir, "runs", f"{run_id}-latency-vs-size.png"), title, target_seconds=target_seconds)
    except ModuleNotFoundError as exc:
        faults.append(f"chart not drawn: {exc.name} is not installed (pip install 'replmon[lab]')")
    except (OSError, PathEscape) as exc:
        faults.append(f"{_why(exc)}: chart {lab_dir / 'runs' / (run_id + '-latency-vs-size.png')} not written")
    return data, chart, faults


def leftover_check(lab: Any) -> tuple[dict[str, list[str]] | None, list[str]]:
    """The lab's leftover check; (None, a fault line) when the servers cannot answer it."""
    try:
        return lab.leftovers(), []
    except Exception as exc:
        from replmon.adapters.explain import explain

        return None, [f"leftover check not done: {explain(exc)}"]


def dead_events(lab: Any) -> list[str]:
    """Event notifications IngestEvents could not store (after its retries), as one line."""
    if lab.event_path is None:
        return []
    try:
        n = len(lab.event_path.dead)
    except Exception:
        return []
    return [f"store unreachable: {n} event notification(s) in the lab's dead-letter queue (not stored)"] if n else []
