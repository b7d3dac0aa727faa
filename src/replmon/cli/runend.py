"""How a lab run ends, whatever happened: the table, the run file, the chart, the
leftover check and one line per fault; each file written whole or not at all, a file that could not
be written named with its cause (a full disk says "disk full"), never a traceback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from replmon.core.files import disk_full
from replmon.core.names import PathEscape, contained
from replmon.core.record import ProbeRecord


def _why(exc: BaseException) -> str:
    """The cause before the path the line names: 'ENOSPC (disk full)' for a full disk."""
    import errno

    if disk_full(exc):
        return f"{errno.errorcode.get(getattr(exc, 'errno', 0) or 0, 'ENOSPC')} (disk full)"
    return f"{type(exc).__name__}: {exc}"


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


#: Quarantined spool entries named one per line; the rest are counted.
QUARANTINE_LINES = 10


def spool_faults(execution: Any, spool_dir: Path | str | None) -> list[str]:
    """What this run's Housekeeping quarantined from the spool (adapters/spool.py), one line each:
    entries it could neither read nor store, set aside so the records behind them were replayed."""
    found = [i.result for i in getattr(execution, "invocations", []) if i.function == "Housekeeping" and isinstance(i.result, dict)]
    entries = [str(q) for r in found for q in ((r.get("spool") or {}).get("quarantined") or [])]
    if not entries:
        return []
    where = f" in {Path(spool_dir) / '_quarantine'}" if spool_dir else ""
    lines = [f"spool: quarantined {e}" for e in entries[:QUARANTINE_LINES]]
    if len(entries) > QUARANTINE_LINES:
        lines.append(f"spool: and {len(entries) - QUARANTINE_LINES} more quarantined")
    lines.append(f"spool: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} quarantined{where} (RecordQuarantined); "
                 "the records behind them were replayed; see `replmon spool list`, then `replmon spool retry` or `drop`")
    return lines


_NO_SPACE = re.compile(r"(?:No space left on device|Disk quota exceeded)(?:: '([^']+)')?")


def failure_faults(execution: Any) -> list[str]:
    """Where the run failed, named: each full disk as ``ENOSPC (disk full): <path>`` with the step
    that met it (a step's error, or the execution's own), then the execution's end when it did not
    succeed, with its error and cause (never just "did not succeed")."""
    from replmon.local.accounting import cause_of

    seen: dict[str, str] = {}
    texts = [(i.function, i.failure) for i in getattr(execution, "invocations", []) if i.error]
    texts += [("the run", f"{execution.error}: {execution.cause}")] if getattr(execution, "error", None) else []
    for function, text in texts:
        if cause_of(str(text)) != "disk full":
            continue
        m = _NO_SPACE.search(str(text))
        where = m.group(1) if m and m.group(1) else " ".join(str(text).split())[:160]
        seen.setdefault(where, function)
    lines = [f"ENOSPC (disk full): {where} (met by {function})" for where, function in seen.items()]
    status = getattr(execution, "status", "SUCCEEDED")
    if status != "SUCCEEDED":
        why = " ".join(f"{execution.error or ''}: {_lambda_message(execution.cause)}".split()).strip(": ")
        lines.append(f"the run's execution ended {status}" + (f": {why[:300]}" if why else ""))
    return lines


def _lambda_message(cause: str | None) -> str:
    """An execution's cause as people read it: a Lambda error's ``errorMessage`` rather than its JSON."""
    import json

    try:
        doc = json.loads(cause or "")
    except ValueError:
        return cause or ""
    return str(doc.get("errorMessage") or cause) if isinstance(doc, dict) else cause or ""


def disk_faults(paths: list[Path]) -> list[str]:
    """Each file system among ``paths`` (the lab directory: its servers' data and the spool) that is
    full, named with its path (core/files.py low_space): a run that failed on a full disk says so,
    whichever step met it."""
    from replmon.core.files import low_space

    found = [low_space(p) for p in dict.fromkeys(paths) if p.exists()]
    return [line for line in found if line]


def run_cause(faults: list[str]) -> str | None:
    """What made a run fail, from its fault lines: a full disk first (it is often why the rest
    failed), else the execution's end with its error.

    >>> run_cause(["the run's execution ended FAILED: StoreUnavailable: ...", "ENOSPC (disk full): /lab: 0 bytes free"])
    'ENOSPC (disk full): /lab: 0 bytes free'
    """
    full = next((f for f in faults if f.startswith("ENOSPC")), None)
    ended = next((f.split(": ", 1)[-1] for f in faults if f.startswith("the run's execution ended")), None)  # its error
    cause = full or ended
    return None if cause is None else cause[:240]


def kept_by_route(records: list[ProbeRecord], account: Any) -> dict[str, dict[str, int]]:
    """Route -> {stored|duplicate|spooled|lost: count} for its records (local/accounting.py
    outcomes): a route whose probes were measured but whose records the store did not take says so."""
    out: dict[str, dict[str, int]] = {}
    for r in records:
        outcome = account.outcomes.get(r.probe_id)
        how = outcome.recorded if outcome is not None else "stored"
        out.setdefault(r.route, {})
        out[r.route][how] = out[r.route].get(how, 0) + 1
    return out


def record_fault(kept: dict[str, int]) -> str | None:
    """A route's records that the latency store does not hold, said beside its verdict (a route measured
    OK whose records were spooled or lost is not "OK" and silent); None when all are held.

    >>> record_fault({"stored": 2, "spooled": 3})
    'not recorded: 3 of 5 record(s) spooled for replay (the store did not take them)'
    >>> record_fault({"stored": 1, "duplicate": 1}) is None
    True
    """
    held = kept.get("stored", 0) + kept.get("duplicate", 0)
    missing = {how: n for how, n in sorted(kept.items()) if how not in ("stored", "duplicate") and n}
    if not missing:
        return None
    n = sum(missing.values())
    word = {"spooled": "spooled for replay"}
    what = word.get(next(iter(missing)), next(iter(missing))) if len(missing) == 1 else \
        "(" + ", ".join(f"{k} {word.get(how, how)}" for how, k in missing.items()) + ")"
    return f"not recorded: {n} of {held + n} record(s) {what} (the store did not take them)"
