"""What every command shares: exit codes, output formats, errors that name the flag, credentials.

Exit codes (documented in `replmon --help` and the README):

    0    every probe COMPLETED within its target (or the command did what it was asked)
    1    a measured failure: a probe FAILED, was STUCK, or replicated over its target
    2    usage: a flag or input is wrong (one line on stderr names it and the fix)
    3    infrastructure: an endpoint, credentials, the store, or a probe that could not be measured
    130  interrupted by SIGINT, 143 by SIGTERM (what was recorded and removed is said on stderr)
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
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table

from replmon.probe.request import ConfigError

OK, MEASURED_FAILURE, USAGE, INFRASTRUCTURE = 0, 1, 2, 3
EXIT_CODES_HELP = ("Exit codes: 0 all probes COMPLETED within target; 1 a probe FAILED, was STUCK or over target; "
                   "2 usage error; 3 infrastructure error (endpoint, credentials, store, a probe not measured); "
                   "130/143 interrupted (SIGINT/SIGTERM).")

out = Console(width=None if sys.stdout.isatty() else 220, soft_wrap=False)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_HELP = "table (for people), json (one document on stdout), csv"


class CliError(Exception):
    """One line for stderr and an exit code."""

    def __init__(self, message: str, code: int = USAGE) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = USAGE) -> NoReturn:
    raise CliError(message, code)


def report_error(exc: CliError) -> int:
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True, markup=True)
    return exc.code


#: Probe configuration fields -> the flag a person typed (messages name the flag).
FLAGS = {
    "sizes": "--sizes", "trials": "--trials", "timeout_seconds": "--timeout", "target_seconds": "--target",
    "max_concurrency": "--concurrency", "poll.floor_seconds": "--resolution", "poll.use_history": "--history",
    "routes.0.name": "--route", "routes.0.prefix": "--prefix", "routes.0.source.bucket": "--source-bucket",
    "routes.0.source.endpoint_url": "--source-endpoint", "routes.0.source.region": "--source-region",
    "routes.0.destinations.0.bucket": "--dest-bucket", "routes.0.destinations.0.endpoint_url": "--dest-endpoint",
    "routes.0.destinations.0.region": "--dest-region",
}


def config_message(exc: ConfigError, flags: Mapping[str, str] = FLAGS) -> str:
    """A ConfigError as one line, each field named by its flag where the CLI has one."""
    parts = []
    for line in str(exc).splitlines()[1:]:
        line = line.strip()
        field, _, rest = line.partition(": ")
        field = re.sub(r"^routes\.0\.destinations\.\d+\.", "routes.0.destinations.0.", field)
        parts.append(f"{flags.get(field, field)}: {rest}" if rest else line)
    return "; ".join(parts)


def emit(rows: Sequence[Mapping[str, Any]], fmt: Format, title: str = "", columns: Sequence[str] | None = None,
         document: Mapping[str, Any] | None = None) -> None:
    """Rows as a table, a CSV, or one JSON document (``document`` if given, else the rows)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    if fmt is Format.json:
        sys.stdout.write(json.dumps(document if document is not None else list(rows), default=str, indent=1) + "\n")
    elif fmt is Format.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r.get(c) is None else r.get(c) for c in columns})
        sys.stdout.write(buf.getvalue())
    else:
        t = Table(title=title or None, title_justify="left")
        for c in columns:
            t.add_column(c, justify="right" if rows and isinstance(rows[0].get(c), int | float) else "left")
        for r in rows:
            t.add_row(*("-" if r.get(c) is None else str(r.get(c)) for c in columns))
        out.print(t)


def check_url(value: str | None, flag: str) -> None:
    if value is not None and not re.match(r"^https?://[^/\s]+/?$", value):
        fail(f"{flag}: {value!r} is not an http(s) URL with no path; use e.g. http://127.0.0.1:8000")


def check_output_file(path: Path | None, flag: str) -> None:
    if path is None:
        return
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        fail(f"{flag}: directory {parent} does not exist; create it or choose another path")
    if not os.access(parent, os.W_OK):
        fail(f"{flag}: directory {parent} is not writable")


def keys_from(access: str | None, secret: str | None, flag: str) -> tuple[str, str] | None:
    """An access key and secret given together, or neither."""
    if bool(access) != bool(secret):
        missing = "secret key" if access else "access key"
        fail(f"{flag}: an access key and a secret key go together; the {missing} is missing "
             "(set both, e.g. in REPLMON_ACCESS_KEY_ID and REPLMON_SECRET_ACCESS_KEY)")
    return (access, secret) if access and secret else None


def aws_region_or_fail(region: str | None, endpoint: str | None, flag: str, profile: str | None = None) -> None:
    """AWS endpoints need a region: say how to set one instead of botocore's NoRegionError."""
    if endpoint or region:
        return
    import boto3

    try:
        found = boto3.session.Session(profile_name=profile).region_name
    except Exception as exc:  # e.g. an unknown profile
        fail(f"--profile: {exc}")
    if not found:
        fail(f"no AWS region: pass {flag}, or set AWS_REGION (or AWS_DEFAULT_REGION, or a profile's region)")


def stack_outputs(stack: str, region: str | None, profile: str | None) -> dict[str, str]:
    """A deployed replmon stack's CloudFormation outputs (LatencyTableName, SourceBucket...)."""
    import boto3
    from botocore.config import Config

    try:
        cfn = boto3.session.Session(profile_name=profile).client(
            "cloudformation", region_name=region, config=Config(connect_timeout=3, read_timeout=10, retries={"total_max_attempts": 2}))
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:
        from replmon.local.execution import _why

        fail(f"--stack-name {stack}: {_why(exc)}", INFRASTRUCTURE)
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
