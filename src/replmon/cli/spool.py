"""`replmon spool list|retry|drop`: what waits in a local spool, and what its quarantine holds.

A record the latency store could not take waits in the spool (``--spool-dir``, the lab's
``DIR/spool``) until the next run replays it; an entry replay could neither read nor store is
quarantined beside it with its reason (adapters/spool.py). ``list`` shows both, ``retry`` puts
quarantined entries back for the next run, ``drop`` deletes them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from replmon.adapters.spool import DirectorySpool, Quarantined
from replmon.cli.common import OK, default_spool_dir, fail
from replmon.cli.render import FORMAT_HELP, Format, emit, err

spool_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="A local spool: records waiting for the store, and quarantined entries with their reason.")

DEFAULT_SPOOL = default_spool_dir()
SPOOL_HELP = "The spool directory (probe --spool-dir; the lab's is DIR/spool)."


def _spool(spool_dir: Path) -> DirectorySpool:

    spool_dir = spool_dir.expanduser()
    if spool_dir.exists() and not spool_dir.is_dir():
        fail(f"--spool-dir: {spool_dir} is a file; give the spool directory (probe --spool-dir, or the lab's DIR/spool)")
    return DirectorySpool(spool_dir)


def _age(at: float | None, now: float) -> str | None:
    return None if at is None else f"{max(0.0, now - at):.0f} s"


@spool_app.command("list")
def list_cmd(
    spool_dir: Annotated[Path, typer.Option(metavar="DIR", help=SPOOL_HELP)] = DEFAULT_SPOOL,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Records waiting to be replayed, and quarantined entries with their reason."""
    spool = _spool(spool_dir)
    now = time.time()
    waiting = [{"state": "waiting", "entry": f"{p.parent.name}/{p.name}", "age": _age(p.lstat().st_mtime, now),
                "reason": "the store could not take it; the next run with the store up replays it"} for p in spool.entries()]
    held = [{"state": "quarantined", "entry": q.entry, "age": _age(q.quarantined_at, now), "reason": q.reason}
            for q in spool.quarantine_entries()]
    emit(waiting + held, fmt, f"spool {spool.root}: {len(waiting)} waiting, {len(held)} quarantined",
         columns=["state", "entry", "age", "reason"],
         document={"spool_dir": str(spool.root), "waiting": waiting, "quarantined": held})
    return OK


def _chosen(spool_dir: Path, entries: list[str] | None, every: bool, verb: str) -> tuple[DirectorySpool, list[Quarantined]]:
    spool = _spool(spool_dir)
    held = spool.quarantine_entries()
    if every == bool(entries):
        fail(f"ENTRY or --all: which quarantined entries to {verb}? (`replmon spool list` names them, as ROUTE/FILE)")
    if every:
        return spool, held
    by_name = {q.entry: q for q in held}
    unknown = [e for e in entries or [] if e not in by_name]
    if unknown:
        fail(f"ENTRY {unknown[0]!r} is not in the quarantine of {spool.root}; `replmon spool list` names what is")
    return spool, [by_name[e] for e in entries or []]


@spool_app.command("retry")
def retry_cmd(
    entries: Annotated[list[str] | None, typer.Argument(metavar="[ENTRY]...", help="Quarantined entries (ROUTE/FILE, as listed).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every quarantined entry.")] = False,
    spool_dir: Annotated[Path, typer.Option(metavar="DIR", help=SPOOL_HELP)] = DEFAULT_SPOOL,
) -> int:
    """Put quarantined entries back in the spool: the next run replays them (or quarantines them again)."""
    spool, chosen = _chosen(spool_dir, entries, every, "retry")
    for q in chosen:
        try:
            dest = spool.retry(q)
        except (OSError, ValueError) as exc:
            fail(f"{q.entry}: not put back: {exc}")
        err.print(f"{q.entry}: back in the spool ({dest}); the next run replays it", highlight=False)
    return OK


@spool_app.command("drop")
def drop_cmd(
    entries: Annotated[list[str] | None, typer.Argument(metavar="[ENTRY]...", help="Quarantined entries (ROUTE/FILE, as listed).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every quarantined entry.")] = False,
    spool_dir: Annotated[Path, typer.Option(metavar="DIR", help=SPOOL_HELP)] = DEFAULT_SPOOL,
) -> int:
    """Delete quarantined entries (and their reasons): what they held is given up."""
    spool, chosen = _chosen(spool_dir, entries, every, "drop")
    for q in chosen:
        try:
            spool.drop(q)
        except OSError as exc:
            fail(f"{q.entry}: not deleted: {exc.strerror or exc}")
        err.print(f"{q.entry}: deleted ({q.reason})", highlight=False)
    return OK
