"""`replmon`: probe any S3 or S3-compatible pair, report from the store, estimate cost, run the lab.

    replmon lab run                    # the README's main command (via `make demo`)
    replmon probe --source-bucket a --dest-bucket b --sizes 1MiB,64MiB --stack-name replmon
    replmon report --route primary --hours 24 --format json --stack-name replmon
    replmon cost --sizes 1MiB,64MiB,1GiB --rate-minutes 15

This module assembles the commands (each in its own module, sharing cli/common.py and
cli/render.py, none importing another command or this module) and runs them (:func:`main`).
"""

from __future__ import annotations

import sys

import typer

from replmon.cli import cost, events, fio, labcmd, probe, report, routes
from replmon.cli.common import EXIT_CODES_HELP, OK, USAGE, CliError, report_error
from replmon.cli.render import err

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure S3 replication latency (RPO) with active probes. " + EXIT_CODES_HELP)
app.add_typer(labcmd.lab_app, name="lab")
app.command(epilog=EXIT_CODES_HELP)(report.report)
app.command("presets")(probe.list_presets)
app.command()(cost.cost)
app.add_typer(fio.fio_app, name="fio")
app.command(epilog=EXIT_CODES_HELP)(probe.probe)
app.add_typer(events.events_app, name="events")
app.command("routes")(routes.routes_cmd)


def _click_exceptions() -> tuple[type[Exception], ...]:
    """The command-line parser's usage errors: typer >= 0.29 vendors click as typer._click."""
    try:
        from typer._click.exceptions import ClickException as Vendored  # the parser typer really uses
    except ImportError:  # pragma: no cover - older typer on click
        from click import ClickException as Vendored  # type: ignore[assignment]
    return (Vendored,)


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

        err.print(f"[bold red]error:[/] {escape(getattr(exc, 'format_message', exc.__str__)())}", highlight=False, soft_wrap=True)
        code = USAGE
    sys.exit(code if isinstance(code, int) else OK)
