"""`replmon events parse`: what IngestEvents would store for a payload, and which records fail and why."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from replmon.cli.common import MEASURED_FAILURE, OK, USAGE, fail, read_capped
from replmon.cli.render import FORMAT_HELP, Format, emit
from replmon.core.route import Route

events_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="S3 event notifications: what IngestEvents would store.")


#: The most `events parse` reads of a file: ten times what Lambda delivers in one invocation (6 MB, its
#: synchronous payload limit), so /dev/zero or a wrong multi-GB file ends in one line, not in memory.
MAX_INPUT_BYTES = 64 * 2**20


def read_input(path: Path, what: str) -> bytes:
    """``path`` ('-': stdin) whole, or one line (exit 2) naming it and why it cannot be read."""
    try:
        raw = read_capped(path, MAX_INPUT_BYTES)
    except OSError as exc:
        fail(f"{what}: {exc.strerror or exc}")
    if len(raw) > MAX_INPUT_BYTES:
        fail(f"{what}: larger than {MAX_INPUT_BYTES // 2**20} MiB; a payload as Lambda delivers it is at most 6 MB - is it the right file?")
    return raw


def json_text(raw: bytes, what: str, code: int) -> object:
    """``raw`` as JSON, or one line naming ``what`` and why not (not UTF-8, not JSON, nested too deep)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        fail(f"{what}: not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON", code)
    except json.JSONDecodeError as exc:
        fail(f"{what}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})", code)
    except RecursionError:
        fail(f"{what}: JSON nested too deep to read (over {sys.getrecursionlimit()} levels); is it the right file? "
             "(a payload or a routes file is a few levels deep)", code)


def _routes_from(path: Path | None) -> list[Route]:
    from pydantic import ValidationError

    if path is None:
        return []
    raw = json_text(read_input(path, f"--routes-file {path}"), f"--routes-file {path}", USAGE)
    items = raw.get("routes", raw) if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        fail(f"--routes-file {path}: \"routes\" is a JSON {type(items).__name__}; give a list of routes "
             '(a probe request, or its routes list: [{"name": ..., "source": ..., "destinations": [...]}])')
    try:
        return [Route.model_validate(r) for r in items]
    except ValidationError as exc:
        # a key may hold a line break or any other character: escaped, so the error stays one line
        fail(f"--routes-file {path}: " + "; ".join(f"{'.'.join(str(p).encode('unicode_escape').decode() for p in e['loc'])}: {e['msg']}"
                                                  for e in exc.errors()))
    except RecursionError:
        fail(f"--routes-file {path}: a route nested too deep to read")


@events_app.command("parse")
def parse(
    file: Annotated[Path, typer.Argument(help="A payload as delivered: an SQS batch, a bare S3 notification, an EventBridge event, or one record ('-' reads stdin).")],
    routes: Annotated[Path | None, typer.Option("--routes-file", metavar="FILE",
                                                help="JSON routes (a probe request, or its routes list): events map onto them.")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Print what would be stored for each record, and which records fail and why (exit 1 if any)."""
    from replmon.signals.event_ingest import plan_ingest, probe_prefixes
    from replmon.signals.s3events import parse_payload

    what = "stdin" if str(file) == "-" else str(file)
    raw = read_input(file, what)
    # A file that is not JSON text holds no record to fail: the input is wrong (2), as for --routes-file;
    # 1 stays what the command's help says, a record of a payload that IngestEvents could not parse.
    payload = json_text(raw, what, USAGE)
    rs = _routes_from(routes)
    try:
        plans = [plan_ingest(p, rs, probe_prefixes(rs)) for p in parse_payload(payload)]
    except RecursionError:
        fail(f"{what}: a record nested too deep to read", MEASURED_FAILURE)
    docs = [p.to_json() for p in plans]
    failed = [d for d in docs if d.get("error")]
    rows = []
    for d in docs:
        sig = d.get("signal", {})
        what = ("fail" if d.get("error") else "store" if d.get("store") else "ack" if d.get("acknowledged") else "ignore")
        rows.append({"position": d["position"], "outcome": what, "type": sig.get("kind") or sig.get("event_name") or "",
                     "route": (d.get("store") or {}).get("route", ""), "key": sig.get("key", ""),
                     "why": d.get("error") or d.get("acknowledged") or d.get("ignored") or "; ".join(sig.get("flags", []))})
    emit(rows, fmt, f"{len(docs)} records, {len(failed)} failing", columns=["position", "outcome", "type", "route", "key", "why"],
         document={"schema_version": 1, "command": "events parse", "records": docs, "failures": [{"position": d["position"], "message_id": d["message_id"], "error": d["error"]} for d in failed]})
    return MEASURED_FAILURE if failed else OK
