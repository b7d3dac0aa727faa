"""`replmon spool list|retry|drop`: what waits in a spool, and what its quarantine holds.

A record the latency store could not take waits in the spool (a local run's ``--spool-dir``, the
lab's ``DIR/spool``; a deployed stack's spool queue) until the next run replays it; an entry replay
could neither read nor store is quarantined beside it with its reason (adapters/spool.py). ``list``
shows both, ``retry`` puts quarantined entries back for the next run, ``drop`` deletes them.
With ``--stack-name`` the stack's queues (outputs RecordSpoolQueueUrl, RecordQuarantineQueueUrl)
are read with the default AWS credential chain or ``--profile``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from replmon.adapters.spool import DirectorySpool, Quarantined, SqsQuarantine
from replmon.cli.common import INFRASTRUCTURE, OK, aws_region_or_fail, default_spool_dir, fail, stack_outputs
from replmon.cli.render import FORMAT_HELP, Format, emit, err

spool_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                        help="The spool: records waiting for the store, and quarantined entries with their reason.")

DEFAULT_SPOOL = default_spool_dir()
SPOOL_HELP = "The spool directory (probe --spool-dir; the lab's is DIR/spool)."
STACK_HELP = "A deployed replmon stack: its spool and quarantine queues instead of a directory."
ENTRIES_HELP = ("Entries (ROUTE/FILE, or a quarantined message id with --stack-name), as `spool list` names them: "
                "quarantined ones, or waiting ones named one by one.")

SpoolDir = Annotated[Path, typer.Option(metavar="DIR", help=SPOOL_HELP)]
StackName = Annotated[str | None, typer.Option(metavar="STACK", help=STACK_HELP)]
Region = Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="With --stack-name: the stack's AWS Region.")]
Profile = Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE", help="AWS profile (else the default credential chain).")]
Entries = Annotated[list[str] | None, typer.Argument(metavar="[ENTRY]...", help=ENTRIES_HELP)]
Every = Annotated[bool, typer.Option("--all", help="Every quarantined entry (never the waiting ones).")]


def _spool(spool_dir: Path) -> DirectorySpool:
    spool_dir = spool_dir.expanduser()
    if spool_dir.exists() and not spool_dir.is_dir():
        fail(f"--spool-dir: {spool_dir} is a file; give the spool directory (probe --spool-dir, or the lab's DIR/spool)")
    return DirectorySpool(spool_dir)


def _queues(stack: str, region: str | None, profile: str | None) -> SqsQuarantine:
    from replmon.adapters import clients

    aws_region_or_fail(region, None, "--region", profile)
    outputs = stack_outputs(stack, region, profile)
    if not outputs.get("RecordSpoolQueueUrl") or not outputs.get("RecordQuarantineQueueUrl"):
        fail(f"--stack-name {stack}: no RecordSpoolQueueUrl/RecordQuarantineQueueUrl output (a stack before the quarantine: update it)",
             INFRASTRUCTURE)
    client = clients.client("sqs", clients.CONTROL, region=region, profile=profile)
    return SqsQuarantine(client, outputs["RecordSpoolQueueUrl"], outputs["RecordQuarantineQueueUrl"])


def _age(at: float | None, now: float) -> str | None:
    return None if at is None else f"{max(0.0, now - at):.0f} s"


@spool_app.command("list")
def list_cmd(spool_dir: SpoolDir = DEFAULT_SPOOL, stack_name: StackName = None, region: Region = None, profile: Profile = None,
             fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table) -> int:
    """Records waiting to be replayed, and quarantined entries with their reason."""
    now = time.time()
    if stack_name:
        queues = _queues(stack_name, region, profile)
        try:
            n, held_q = queues.waiting(), queues.entries()
        except Exception as exc:
            from replmon.adapters.explain import explain

            fail(f"--stack-name {stack_name}: the spool queues: {explain(exc)}", INFRASTRUCTURE)
        held = [{"state": "quarantined", "entry": q.message_id, "age": _age(q.sent_at, now), "reason": q.reason} for q in held_q]
        emit(held, fmt, f"stack {stack_name}: {n} waiting in the spool queue, {len(held)} quarantined",
             columns=["state", "entry", "age", "reason"],
             document={"spool_queue": queues.spool_url, "waiting": n, "quarantined": [q.to_json() for q in held_q]})
        return OK
    spool = _spool(spool_dir)
    waiting = [{"state": "waiting", "entry": f"{p.parent.name}/{p.name}", "age": _age(p.lstat().st_mtime, now),
                "reason": _waits_because(spool.read(p))} for p in spool.entries()]
    held = [{"state": "quarantined", "entry": q.entry, "age": _age(q.quarantined_at, now), "reason": q.reason}
            for q in spool.quarantine_entries()]
    emit(waiting + held, fmt, f"spool {spool.root}: {len(waiting)} waiting, {len(held)} quarantined",
         columns=["state", "entry", "age", "reason"],
         document={"spool_dir": str(spool.root), "waiting": waiting, "quarantined": held})
    return OK


def _waits_because(read: object) -> str:
    """A waiting entry's reason: a record waits for the store; anything else is quarantined by the next
    replay, and says so now."""
    if isinstance(read, str):
        return f"{read}: the next replay quarantines it (replmon spool drop ENTRY deletes it now)"
    return "the store could not take it; the next run with the store up replays it"


def _which(entries: list[str] | None, every: bool, verb: str) -> set[str] | None:
    if every == bool(entries):
        fail(f"ENTRY or --all: which quarantined entries to {verb}? (`replmon spool list` names them)")
    return None if every else set(entries or [])


def _chosen(spool: DirectorySpool, wanted: set[str] | None) -> tuple[list[Quarantined], list[Path]]:
    """The quarantined entries, and the waiting ones (named one by one; ``--all`` is the quarantine's)."""
    held = spool.quarantine_entries()
    if wanted is None:
        return held, []
    by_name = {q.entry: q for q in held}
    waiting = {f"{p.parent.name}/{p.name}": p for p in spool.entries()}
    unknown = sorted(wanted - set(by_name) - set(waiting))
    if unknown:
        fail(f"ENTRY {unknown[0]!r} is neither waiting nor quarantined in {spool.root}; `replmon spool list` names what is")
    return [by_name[e] for e in sorted(wanted) if e in by_name], [waiting[e] for e in sorted(wanted) if e not in by_name]


def _handle_queued(stack: str, region: str | None, profile: str | None, wanted: set[str] | None, retry: bool) -> int:
    queues = _queues(stack, region, profile)
    try:
        done, failed = queues.handle(wanted, retry=retry)
    except Exception as exc:  # the quarantine queue could not be read at all
        from replmon.adapters.explain import explain

        fail(f"--stack-name {stack}: the quarantine queue: {explain(exc)}", INFRASTRUCTURE)
    missing = sorted((wanted or set()) - {d.message_id for d in done} - {d.message_id for d, _ in failed})
    for d in done:
        err.print(f"{d.message_id}: " + ("back in the spool queue; the next run replays it" if retry else f"deleted ({d.reason})"),
                  highlight=False, soft_wrap=True)
    for d, why in failed:  # each named with what to do; the others were still handled
        err.print(f"{d.message_id}: {why}", highlight=False, soft_wrap=True)
    if missing:
        lost = f"ENTRY {missing[0]!r} is not in the quarantine queue of {stack}; `replmon spool list --stack-name {stack}` names what is"
        if not failed:
            fail(lost)
        err.print(f"error: {lost}", highlight=False, soft_wrap=True)  # the SQS failures decide the code: 3
    return INFRASTRUCTURE if failed else OK


@spool_app.command("retry")
def retry_cmd(entries: Entries = None, every: Every = False, spool_dir: SpoolDir = DEFAULT_SPOOL, stack_name: StackName = None,
              region: Region = None, profile: Profile = None) -> int:
    """Put quarantined entries back in the spool: the next run replays them (or quarantines them again)."""
    wanted = _which(entries, every, "retry")
    if stack_name:
        return _handle_queued(stack_name, region, profile, wanted, retry=True)
    spool = _spool(spool_dir)
    held, waiting = _chosen(spool, wanted)
    failed = 0
    for q in held:  # every entry named is tried: one that cannot be put back is said, and the rest still are
        try:
            dest = spool.retry(q)
        except (OSError, ValueError) as exc:
            failed += _not_done(f"{q.entry}: not put back: {exc}")
            continue
        err.print(f"{q.entry}: back in the spool ({dest}); the next run replays it", highlight=False, soft_wrap=True)
    for path in waiting:
        err.print(f"{path.parent.name}/{path.name}: already waiting in the spool; the next run with the store up replays it",
                  highlight=False, soft_wrap=True)
    return _outcome(failed, "put back")


def _not_done(line: str) -> int:
    err.print(line, highlight=False, soft_wrap=True)
    return 1


def _outcome(failed: int, verb: str) -> int:
    """The filesystem refusing an entry is not a wrong flag: exit 3 (not done) once every entry was tried."""
    if failed:
        err.print(f"{failed} entr{'y' if failed == 1 else 'ies'} not {verb} (each named above); the others were", highlight=False, soft_wrap=True)
        return INFRASTRUCTURE
    return OK


@spool_app.command("drop")
def drop_cmd(entries: Entries = None, every: Every = False, spool_dir: SpoolDir = DEFAULT_SPOOL, stack_name: StackName = None,
             region: Region = None, profile: Profile = None) -> int:
    """Delete quarantined entries (and their reasons), or waiting ones named: what they held is given up."""
    wanted = _which(entries, every, "drop")
    if stack_name:
        return _handle_queued(stack_name, region, profile, wanted, retry=False)
    spool = _spool(spool_dir)
    held, waiting = _chosen(spool, wanted)
    failed = 0
    for q in held:  # every entry named is tried: one that cannot be deleted is said, and the rest still are
        try:
            spool.drop(q)
        except OSError as exc:
            failed += _not_done(f"{q.entry}: not deleted: {exc.strerror or exc}")
            continue
        err.print(f"{q.entry}: deleted ({q.reason})", highlight=False, soft_wrap=True)
    for path in waiting:  # a record that waited for the store: given up, by name only
        try:
            path.unlink()
        except OSError as exc:
            failed += _not_done(f"{path.parent.name}/{path.name}: not deleted: {exc.strerror or exc}")
            continue
        err.print(f"{path.parent.name}/{path.name}: deleted (it waited for the store; its record is given up)", highlight=False, soft_wrap=True)
    return _outcome(failed, "deleted")
