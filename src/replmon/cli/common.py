"""What every command shares: exit codes, errors that name the flag, flag checks, credentials,
a deployed stack's outputs (output and rendering: cli/render.py).

Exit codes (documented in `replmon --help` and the README):

    0    every probe COMPLETED within its target (or the command did what it was asked)
    1    a measured failure: a probe FAILED, was STUCK, or replicated over its target
    2    usage: a flag or input is wrong (one line on stderr names it and the fix)
    3    infrastructure: an endpoint, credentials, the store, or a probe that could not be measured
    5    could not record: a record is not in the latency store (spooled for replay, or lost) or the
         run file could not be written; one line per cause on stderr (docs/SEMANTICS.md)
    130  interrupted by SIGINT, 143 by SIGTERM (what was recorded and removed is said on stderr)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from replmon.adapters.explain import explain
from replmon.cli.render import err
from replmon.core.errors import ConfigError
from replmon.core.names import ENDPOINT_URL_RE
from replmon.core.record import ProbeRecord, ProbeStatus

OK, MEASURED_FAILURE, USAGE, INFRASTRUCTURE = 0, 1, 2, 3
NOT_RECORDED = 5  # (4 is left for `report`'s "no data", issue 23)
EXIT_CODES_HELP = ("Exit codes: 0 all probes COMPLETED within target; 1 a probe FAILED, was STUCK or over target; "
                   "2 usage error; 3 infrastructure error (endpoint, credentials, store, a probe not measured); "
                   "5 could not record (a record spooled for replay or lost, or the run file not written); "
                   "130/143 interrupted (SIGINT/SIGTERM).")

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


def check_url(value: str | None, flag: str) -> None:
    if value is not None and not ENDPOINT_URL_RE.match(value):
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
    from replmon.adapters import clients

    try:
        found = clients.session(profile=profile).region_name
    except Exception as exc:  # e.g. an unknown profile
        fail(f"--profile: {exc}")
    if not found:
        fail(f"no AWS region: pass {flag}, or set AWS_REGION (or AWS_DEFAULT_REGION, or a profile's region)")


def stack_outputs(stack: str, region: str | None, profile: str | None) -> dict[str, str]:
    """A deployed replmon stack's CloudFormation outputs (LatencyTableName, SourceBucket...)."""
    from replmon.adapters import clients

    try:
        cfn = clients.client("cloudformation", clients.CONTROL, region=region, profile=profile)
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def exit_code(records: list[ProbeRecord], planned: int, execution_ok: bool) -> int:
    """1 if replication was seen failing or late; else 3 if anything could not be measured or recorded; else 0."""
    if any(r.status in (ProbeStatus.FAILED, ProbeStatus.STUCK) or (r.status is ProbeStatus.COMPLETED and not r.within_target)
           for r in records):
        return MEASURED_FAILURE
    if not execution_ok or len(records) != planned or any(r.status is not ProbeStatus.COMPLETED for r in records):
        return INFRASTRUCTURE
    return OK


def run_exit_code(records: list[ProbeRecord], planned: int, execution_ok: bool, could_not_record: bool) -> int:
    """:func:`exit_code`, with "could not record" (5) ranked after a measured failure (1): a late or
    failing replication is the news; a record not in the store comes before an unmeasured probe."""
    code = exit_code(records, planned, execution_ok)
    if code == MEASURED_FAILURE or not could_not_record:
        return code
    return NOT_RECORDED
