"""`replmon`: probe any S3 or S3-compatible pair, report from the store, estimate cost, run the lab.

    replmon lab run                    # the README's main command (via `make demo`)
    replmon probe --source-bucket a --dest-bucket b --sizes 1MiB,64MiB --stack-name replmon
    replmon report --route primary --hours 24 --format json --stack-name replmon
    replmon cost --sizes 1MiB,64MiB,1GiB --rate-minutes 15

This module assembles the commands (each in its own module, sharing cli/common.py and
cli/render.py, none importing another command or this module) and runs them (:func:`main`).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import typer

from replmon import __version__
from replmon.cli import cost, events, fio, fleet, labcmd, preflight, probe, report, routes, spool, uninstall
from replmon.cli.common import EXIT_CODES_HELP, OK, USAGE, CliError, extra_of, missing_extra_message, plain, report_error
from replmon.cli.exitcodes import COMMANDS, Exit, help_for
from replmon.cli.render import err
from replmon.core.files import write_atomic


def _help_keeps_flags_whole() -> None:
    """Help is click's plain text (no Rich markup to eat "[lo, hi]", no cut cells); its wrapper
    must not split a flag at its hyphen ("--slo-" / "target")."""
    try:
        from typer._click import _textwrap as textwrap_module  # typer >= 0.29 vendors click
    except ImportError:  # pragma: no cover
        from click import _textwrap as textwrap_module  # type: ignore[no-redef]
    base = textwrap_module.TextWrapper
    if getattr(base, "keeps_flags_whole", False):
        return

    class WholeFlags(base):  # type: ignore[misc, valid-type]
        keeps_flags_whole = True

        def __init__(self, *args: object, **kwargs: object) -> None:
            kwargs["break_on_hyphens"] = False
            super().__init__(*args, **kwargs)

    textwrap_module.TextWrapper = WholeFlags  # type: ignore[misc]


_help_keeps_flags_whole()


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"replmon {__version__}\n")
        raise typer.Exit(0)


app = typer.Typer(add_completion=False, rich_markup_mode=None, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure S3 replication latency (the RPO a DR plan really gets) with probes and passive signals. "
                  + EXIT_CODES_HELP)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit.")) -> None:
    """replmon."""


app.add_typer(labcmd.lab_app, name="lab")
app.command(epilog=help_for("report"))(report.report)
app.command("presets", epilog=help_for("presets"))(probe.list_presets)
app.command(epilog=help_for("cost"))(cost.cost)
app.add_typer(fio.fio_app, name="fio")
app.command(epilog=help_for("probe"))(probe.probe)
app.add_typer(events.events_app, name="events")
app.command("routes", epilog=help_for("routes"))(routes.routes_cmd)
app.add_typer(fleet.fleet_app, name="fleet", epilog=help_for("fleet"))
app.command(epilog=help_for("preflight"))(preflight.preflight)
app.command(epilog=help_for("uninstall"))(uninstall.uninstall)
app.add_typer(spool.spool_app, name="spool")


def _exit_codes_in_every_help(typer_app: typer.Typer, prefix: str = "") -> None:
    """Each command's --help ends with its exit codes (cli/exitcodes.py COMMANDS), also for the
    commands a group module registers itself (tests/test_operator_cli.py checks every one)."""
    for info in typer_app.registered_commands:
        name = prefix + (info.name or (info.callback.__name__ if info.callback else "").lower().replace("_", "-"))
        if info.epilog is None and name in COMMANDS:
            info.epilog = help_for(name)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None and group.name:
            _exit_codes_in_every_help(group.typer_instance, f"{prefix}{group.name} ")


_exit_codes_in_every_help(app)


def _click_exceptions() -> tuple[type[Exception], ...]:
    """The command-line parser's usage errors: typer >= 0.29 vendors click as typer._click."""
    try:
        from typer._click.exceptions import ClickException as Vendored  # the parser typer really uses
    except ImportError:  # pragma: no cover - older typer on click
        from click import ClickException as Vendored  # type: ignore[assignment]
    return (Vendored,)


def crash_log_dir() -> Path:
    """Where :func:`unexpected` keeps tracebacks: beside the default spool (``$XDG_STATE_HOME/replmon``)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "replmon" / "logs"


def unexpected(exc: BaseException) -> int:
    """An error no command named: one line on stderr with the path of a log holding the traceback;
    exit 5 ("could not record or run"), never 1, which a gate script reads as late replication."""
    import tempfile
    import time
    import traceback

    from rich.markup import escape

    text = "".join(traceback.format_exception(exc))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    where: Path | None = None
    for folder in (crash_log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            where = write_atomic(folder / f"replmon-error-{stamp}-{os.getpid()}.log", text.encode())
            break
        except OSError:
            continue
    what = " ".join(str(exc).split())[:300] or "(no message)"
    tail = f"the traceback is in {where}" if where else "the traceback could not be written to a log"
    err.print(f"[bold red]error:[/] could not record or run: {type(exc).__name__}: {escape(what)}; {escape(tail)}",
              highlight=False, soft_wrap=True)
    return int(Exit.NOT_RECORDED)


def main(argv: list[str] | None = None) -> None:
    """The console entry: one line and an exit code for every error, never a traceback."""
    from replmon.local.execution import Interrupted, RunInterrupted, interrupts, salvage_summary

    try:
        with interrupts():
            code = app(args=argv, standalone_mode=False)
    except CliError as exc:
        code = report_error(exc)
    except RunInterrupted as exc:
        for line in salvage_summary(exc.salvage):
            err.print(line, highlight=False)
        code = 128 + {"SIGINT": 2, "SIGTERM": 15}.get(exc.salvage.signame, 0)
    except Interrupted as exc:
        err.print(f"interrupted by {exc.signame}; nothing was running", highlight=False)
        code = exc.exit_code
    except typer.Abort:
        code = 130
    except _click_exceptions() as exc:  # typer's own parsing: unknown option, bad choice...
        from rich.markup import escape

        message = plain(getattr(exc, "format_message", exc.__str__)())
        message = re.sub(r"^Invalid value for '(--[\w-]+)'(?: / '[^']*')?: ", r"\1: ", message)
        err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        code = USAGE
    except ModuleNotFoundError as exc:  # an optional dependency a command reached without its own check
        extra = extra_of(exc.name or "")
        if extra is None:
            code = unexpected(exc)
        else:
            code = report_error(CliError(missing_extra_message(" ".join(a for a in (argv or sys.argv[1:])[:2] if not a.startswith("-")),
                                                               extra, [exc.name or ""])))
    except Exception as exc:  # what nothing else named: one line, the traceback in a log, exit 5 (never 1, "breach")
        code = unexpected(exc)
    sys.exit(code if isinstance(code, int) else OK)
