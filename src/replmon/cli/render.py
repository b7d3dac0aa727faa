"""How every command shows what it found: the consoles (results on stdout, progress and notices
on stderr), the three formats, the headline, the tables and the progress bar. Commands import
this module and cli/common.py, never each other or the app (cli/app.py assembles them).

Tables never cut a number: a table that does not fit the terminal is printed transposed (one
column per row, in chunks that fit), and numbers never wrap (they hold no spaces). The JSON
document's shape is cli/output.py's (docs/SEMANTICS.md, "Output").
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from replmon.core.record import ProbeRecord
from replmon.core.stats import SizeSummary
from replmon.signals.verdict import RouteJudgement, RpoVerdict, duration, num


def _width(stream: Any, default: int) -> int | None:
    """The terminal's width (Rich reads COLUMNS when set); ``default`` when piped."""
    if os.environ.get("COLUMNS", "").isdigit() or stream.isatty():
        return None
    return default


out = Console(width=_width(sys.stdout, 220), soft_wrap=False)
err = Console(stderr=True, width=_width(sys.stderr, 200))


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_HELP = "table (for people), json (one document on stdout), csv"
WIDE_HELP = "Every column (MiB/s, HEADs per probe, interval widths, bounds); default: the ones an operator reads first."


# ---------------------------------------------------------------------------------------- formats
def _cell(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return ";".join(str(x) for x in v)
    return "" if v is None else v


def emit(rows: Sequence[Mapping[str, Any]], fmt: Format, title: str = "", columns: Sequence[str] | None = None,
         document: Mapping[str, Any] | None = None, footnotes: Sequence[str] = ()) -> None:
    """Rows as a table, a CSV, or one JSON document (``document`` if given, else the rows)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if fmt is Format.json:
        sys.stdout.write(json.dumps(document if document is not None else list(rows), default=str, indent=1) + "\n")
    elif fmt is Format.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: _cell(r.get(c)) for c in columns})
        sys.stdout.write(buf.getvalue())
    else:
        print_table(rows, columns, title)
        for note in footnotes:
            out.print(note, highlight=False, markup=False)


def _text(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


#: A cell that reads as a number (right-aligned): 1,234.5  0.06*  100%  3/3  0/0/0  -
NUMERIC = re.compile(r"^(-|[-+]?[\d,]*\.?\d+(e[-+]?\d+)?[%*]?|\d+(/\d+)+)$")


def _min_width(text: str) -> int:
    """The narrowest a cell can be: its longest word (Rich wraps at spaces only)."""
    return max((len(w) for w in text.split()), default=1)


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str = "", console: Console | None = None) -> None:
    """A table when it fits the console, else the same cells transposed in chunks that fit."""
    console = console or out
    cells = [[_text(r.get(c)) for c in columns] for r in rows]
    need = [max([_min_width(c)] + [_min_width(row[i]) for row in cells]) for i, c in enumerate(columns)]
    width = console.width
    if sum(n + 3 for n in need) + 1 <= width or not rows:
        t = Table(title=escape(title) if title else None, title_justify="left")
        for i, c in enumerate(columns):
            numeric = bool(rows) and all(NUMERIC.match(row[i]) for row in cells)
            t.add_column(escape(c), justify="right" if numeric else "left",
                         min_width=max([_min_width(row[i]) for row in cells], default=1))
        for row in cells:
            t.add_row(*(escape(x) for x in row))
        console.print(t)
        return
    _print_transposed(cells, columns, title, console)


def _print_transposed(cells: list[list[str]], columns: Sequence[str], title: str, console: Console) -> None:
    """One column per row (labelled by its first cell), as many as fit; the field names down the left."""
    label = max(len(c) for c in columns) + 3
    per = max(1, (console.width - label - 1) // (max(len(x) for row in cells for x in row) + 3))
    if title:
        console.print(escape(title), highlight=False)
    for start in range(0, len(cells), per):
        chunk = cells[start:start + per]
        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column("field", no_wrap=True, style="bold", min_width=label - 3)  # field names whole
        for _ in chunk:
            t.add_column(justify="right", overflow="fold")  # a value wider than the console wraps, never cut
        for i, c in enumerate(columns):
            t.add_row(escape(c), *(escape(row[i]) for row in chunk))
        console.print(t)
        console.print()


def progress_bar() -> Progress:
    return Progress(TextColumn("[bold]probes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                    disable=not err.is_terminal and os.environ.get("REPLMON_PROGRESS") != "1")


# ---------------------------------------------------------------------------------------- the headline
STYLE = {RpoVerdict.OK: "bold green", RpoVerdict.BREACH: "bold red", RpoVerdict.NOT_MEASURED: "bold yellow", RpoVerdict.NO_DATA: "bold yellow"}
WORD = {RpoVerdict.OK: "OK", RpoVerdict.BREACH: "BREACH", RpoVerdict.NOT_MEASURED: "NOT MEASURED", RpoVerdict.NO_DATA: "NO DATA"}


def rpo_text(v: RouteJudgement) -> str:
    if v.rpo_bound == "unbounded":
        return "UNBOUNDED"
    if v.rpo_seconds is None:
        return "unknown"
    return ("≥ " if v.rpo_bound == "lower" else "≤ ") + f"{num(v.rpo_seconds)} s"


def headline_lines(verdicts: Sequence[RouteJudgement], counted: str = "") -> list[str]:
    """The answer first (Rich markup): per route, its RPO now against its target, the probes within
    it (over ``counted``, e.g. "last 24 h") and what is failing, each finding with its severity."""
    lines = []
    for v in verdicts:
        where = f"last {duration(v.rpo_window_seconds)}" if v.rpo_window_seconds is not None else "this run"
        lines.append(f"[{STYLE[v.verdict]}]{WORD[v.verdict]}[/] route {escape(v.route)}: RPO now {rpo_text(v)} ({where}), "
                     f"target {num(v.target_seconds)} s; {v.within_target} of {v.judged} probes within target"
                     + (f" ({counted})" if counted else "")
                     + (f", {v.probes - v.judged} not judged" if v.probes > v.judged else ""))
        failing = [f for f in v.findings if f.effect != "none" or f.severity == "page"]
        notes = [f for f in v.findings if f not in failing]
        if failing:
            lines += [f"  failing {escape(f'[{f.severity}]')}: {escape(f.detail)}" for f in failing]
        elif v.verdict is RpoVerdict.NO_DATA:
            lines.append("  nothing to judge: no probe, in-flight probe or RTC metric"
                         + (" in the window; check --route and that the schedule is on" if v.rpo_window_seconds else ""))
        else:
            lines.append("  failing: nothing")
        lines += [f"  note {escape(f'[{f.severity}]')}: {escape(f.detail)}" for f in notes]
        if v.extra.get("record_fault"):  # measured, but its records are not in the store (lab run --routes)
            lines.append(f"  [bold yellow]{escape(str(v.extra['record_fault']))}[/]")
    return lines


def print_headline(verdicts: Sequence[RouteJudgement], fmt: Format, counted: str = "") -> None:
    """Before the table on stdout; to stderr when stdout carries a JSON or CSV document."""
    console = out if fmt is Format.table else err
    for line in headline_lines(verdicts, counted):
        console.print(line, highlight=False, soft_wrap=fmt is not Format.table)
    if fmt is Format.table:
        out.print()


# ---------------------------------------------------------------------------------------- probe tables
def small(q: int, n: int) -> bool:
    """A q-th percentile of n values is no tail estimate until n >= 100 / (100 - q) (p90: 10, p99: 100)."""
    return n < 100 / (100 - q)


SMALL_NOTE = ("* fewer latencies than the percentile needs (p50: 2, p90: 10, p99: 100): it is interpolated "
              "between the few there are, not a tail estimate")


def _s(x: float | None, n: int | None = None, q: int | None = None) -> str | None:
    if x is None:
        return None
    text = f"{x:.2f}" if x < 1000 else f"{x:.0f}"
    return text + ("*" if q is not None and n is not None and small(q, n) else "")


def summary_rows(summaries: Sequence[SizeSummary], within: Mapping[tuple[str, str], tuple[int, int]], *, wide: bool = False,
                 one_route: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """The table people read (and its columns): per size class the n the percentiles use, the
    percentiles of the interval midpoints (marked when n is small), how many judged probes were
    within the target, the failures; ``wide`` adds throughput, HEADs, interval widths and bounds."""
    rows = []
    for s in summaries:
        n = s.completed
        ok, judged = within.get((s.route, s.size_class), (0, 0))
        row: dict[str, Any] = {
            "route": s.route, "size": s.size_class, "n": n,
            "p50 s": _s(s.p50, n, 50), "p90 s": _s(s.p90, n, 90), "p99 s": _s(s.p99, n, 99), "max s": _s(s.max),
            "within target": f"{ok}/{judged}", "failed / stuck / error": f"{s.failed}/{s.stuck}/{s.errors}",
            "MiB/s": None if s.mib_per_s is None else f"{s.mib_per_s:.1f}",
            "HEADs per probe": None if s.heads_per_probe is None else f"{s.heads_per_probe:.1f}",
            "widest interval s": None if s.max_width is None else f"{s.max_width:.3f}",
            "bound s": None if s.max_bound is None else (f"{s.min_bound:.3f}" if s.min_bound == s.max_bound
                                                         else f"{s.min_bound:.3f}-{s.max_bound:.3f}"),
            "bound met": f"{s.bound_met}/{s.completed}" if s.completed else None,
        }
        rows.append(row)
    columns = (["route"] if wide or not one_route else []) + ["size", "n", "p50 s", "p90 s", "p99 s", "max s", "within target",
                                                               "failed / stuck / error"]
    if wide:
        columns += ["MiB/s", "HEADs per probe", "widest interval s", "bound s", "bound met"]
    return rows, columns


def footnotes(summaries: Sequence[SizeSummary]) -> list[str]:
    return [SMALL_NOTE] if any(small(99, s.completed) for s in summaries if s.p99 is not None) else []


def write_data(records: list[ProbeRecord], path: Path) -> Path:
    """The run's records as JSON (the lab keeps one file per run), written whole or not at all."""
    from replmon.core.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return write_atomic(path, json.dumps([r.to_item() for r in records], indent=1, default=str).encode())
