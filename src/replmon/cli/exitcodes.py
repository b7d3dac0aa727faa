"""The exit codes, one table for every command: scripts and schedulers gate on them.

The table in docs/SEMANTICS.md is :func:`markdown` (tests/test_operator_cli.py
compares); each command's ``--help`` lists its own codes (:func:`help_for`).

>>> int(Exit.NO_DATA), Exit.from_verdict("breach").name
(4, 'BREACH')
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    BREACH = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    NO_DATA = 4
    NOT_RECORDED = 5
    SIGINT = 130
    SIGTERM = 143

    @classmethod
    def from_verdict(cls, verdict: str) -> Exit:
        """A verdict (signals/verdict.py) as an exit code."""
        return {"ok": cls.OK, "breach": cls.BREACH, "not_measured": cls.INFRASTRUCTURE, "no_data": cls.NO_DATA}[verdict]


#: What each code means, the same for every command (a command's help may say what it means there).
MEANING: dict[Exit, str] = {
    Exit.OK: "OK: every route judged is within its target (or the command did what it was asked)",
    Exit.BREACH: "breach: replication is late or failing - RPO over target or unbounded, a probe FAILED or over target "
                 "(a STUCK one whose age is), or the page burn-rate alert fires",
    Exit.USAGE: "usage: a flag or an input is wrong (one line on stderr names it and the fix)",
    Exit.INFRASTRUCTURE: "not measured: an endpoint, credentials or the store failed, or a probe could not measure what "
                         "was planned (ERROR, a record missing, STUCK within the target)",
    Exit.NO_DATA: "no data: a route has nothing to judge in the window (a typo in --route, a schedule that is off): "
                  "never reported as RPO 0",
    Exit.NOT_RECORDED: "could not record or run: a record is not in the latency store (spooled for replay, quarantined, or "
                       "lost), the run file could not be written, or a lease could not be given back (its expiry named), one line "
                       "per cause on stderr (docs/SEMANTICS.md, 'Could not record'); or an error nothing else named: one line and "
                       "the path of a log holding the traceback",
    Exit.SIGINT: "interrupted by SIGINT (Ctrl-C): what was recorded and removed is said on stderr",
    Exit.SIGTERM: "interrupted by SIGTERM",
}

#: When several routes disagree, the first of these any route has is the exit code.
PRECEDENCE = (Exit.BREACH, Exit.NOT_RECORDED, Exit.INFRASTRUCTURE, Exit.NO_DATA, Exit.OK)

_RUN = (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.NOT_RECORDED, Exit.SIGINT, Exit.SIGTERM)
_PLAIN = (Exit.OK, Exit.USAGE)
#: The codes each command can return (every command of the app has an entry; a test checks).
COMMANDS: dict[str, tuple[Exit, ...]] = {
    "probe": _RUN,
    "report": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.NO_DATA),
    "lab run": _RUN,
    "lab chaos": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab up": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "lab down": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "lab preflight": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE),
    "lab bench": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab bench-mounts": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab bench-ingest": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab bench-stall": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab bench-fleet": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab bench-collector": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "lab fio": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.SIGINT, Exit.SIGTERM),
    "uninstall": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "preflight": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE),
    "presets": _PLAIN,
    "cost": _PLAIN,
    "routes": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet put": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet inventory": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet release": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet enroll": (Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fleet unenroll": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "events parse": (Exit.OK, Exit.BREACH, Exit.USAGE),
    "fio parse": _PLAIN,
    "fio presets": _PLAIN,
    "fio jobfile": _PLAIN,
    "fio knee": _PLAIN,
    "fio targets": _PLAIN,
    "fio report": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "fio cost": _PLAIN,
    "spool list": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "spool retry": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
    "spool drop": (Exit.OK, Exit.USAGE, Exit.INFRASTRUCTURE),
}
#: Any command can meet an error nothing else named: cli/app.main says so in one line and exits 5.
COMMANDS = {name: tuple(sorted({*codes, Exit.NOT_RECORDED})) for name, codes in COMMANDS.items()}

#: What a code means for one command, where it says more than the table.
SPECIFIC: dict[tuple[str, Exit], str] = {
    ("report", Exit.BREACH): "a route's RPO is over --target (a STUCK probe's age counts) or unbounded, or the page burn-rate alert fires",
    ("report", Exit.NO_DATA): "a route has no probe, in-flight probe or RTC metric in the RPO window, or (--fleet) a registry "
                              "item is not a valid route: a configuration to fix, not a breach (replmon fleet names the field); a route listed and not "
                              "measured (mode off: not enrolled, superseded) is shown and never sets the code",
    ("report", Exit.INFRASTRUCTURE): "the store could not be read, or (--fleet) one route's or registry group's reads failed "
                                     "(throttled, denied): its row names the error, the other routes are reported",
    ("lab chaos", Exit.OK): "the fault showed as a breach and the healed route recovered (with --routes: the fleet alarm named that route alone)",
    ("lab chaos", Exit.BREACH): "the fault did not show as a breach, or the route did not recover (with --routes: another route or none was named)",
    ("lab fio", Exit.BREACH): "a target's fio run failed or left something mounted",
    ("preflight", Exit.OK): "every check passed or does not apply (warnings say what the route will lack)",
    ("lab preflight", Exit.OK): "every check passed or does not apply (as preflight, on the lab's route)",
    ("preflight", Exit.BREACH): "a check failed: the route is not ready to probe (each failure prints its fix)",
    ("preflight", Exit.INFRASTRUCTURE): "a configuration could not be read (the check says which permission to grant)",
    ("events parse", Exit.BREACH): "a record failed to parse (IngestEvents would retry it)",
    ("fleet enroll", Exit.BREACH): "a bucket's merge was refused (S3 would reject it); its reason and fix are printed, the "
                                   "other buckets were done",
    ("fleet release", Exit.OK): "the lease was ended and the release recorded, or no run held it",
    ("fleet release", Exit.NOT_RECORDED): "the lease was ended, but the record of it could not be written (the cause is named)",
    ("fleet put", Exit.USAGE): "the route is invalid (the field and its fix are named) or changed since the version given",
}


def combine(codes: Iterable[int]) -> int:
    """Several routes' (or steps') codes as one: the most urgent by :data:`PRECEDENCE`."""
    seen = set(codes)
    return next((int(c) for c in PRECEDENCE if c in seen), max(seen, default=0))


def help_for(command: str) -> str:
    """The epilog of a command's --help: its codes, one per line (typer keeps the lines)."""
    lines = [f"{int(c)}  {SPECIFIC.get((command, c), MEANING[c])}" for c in COMMANDS[command]]
    return "Exit codes:\n\n" + "\n\n".join(lines)


def markdown() -> str:
    """The table docs/SEMANTICS.md carries (between ``<!-- exit-codes:start/end -->``)."""
    rows = ["| code | meaning | returned by |", "| ---: | --- | --- |"]
    for code, meaning in MEANING.items():
        users = [c for c, codes in COMMANDS.items() if code in codes]
        who = "every command" if len(users) == len(COMMANDS) else ", ".join(f"`{u}`" for u in users)
        rows.append(f"| {int(code)} | {meaning} | {who} |")
    notes = [f"- `{cmd}` {int(code)}: {text}" for (cmd, code), text in SPECIFIC.items()]
    return ("\n".join(rows) + "\n\nWhen routes disagree the most urgent code wins: "
            + " > ".join(str(int(c)) for c in PRECEDENCE) + ". Per command:\n\n" + "\n".join(notes) + "\n")
