"""What every command shares: exit codes (the table is cli/exitcodes.py), errors that name the
flag, flag checks, credentials, a deployed stack's outputs (output and rendering: cli/render.py).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from replmon.adapters.explain import explain
from replmon.cli.exitcodes import Exit, combine
from replmon.cli.render import err
from replmon.core.errors import ConfigError
from replmon.core.names import ENDPOINT_URL_RE
from replmon.core.record import ProbeRecord
from replmon.signals.verdict import RouteJudgement, judge_run

OK, MEASURED_FAILURE, USAGE, INFRASTRUCTURE, NO_DATA = Exit.OK, Exit.BREACH, Exit.USAGE, Exit.INFRASTRUCTURE, Exit.NO_DATA
EXIT_CODES_HELP = ("Exit codes: 0 OK; 1 breach (RPO over target or unbounded, a probe FAILED, STUCK or over target, a page "
                   "alert); 2 usage error; 3 not measured (endpoint, credentials, store, a probe ERROR); 4 no data; "
                   "5 could not record or run (a record spooled, quarantined or lost, the run file not written, or an error nothing "
                   "else named: one line and the log with its traceback); "
                   "130/143 interrupted. Each command's --help says what they mean there.")
NOT_RECORDED = Exit.NOT_RECORDED

#: The optional dependencies (pyproject.toml extras) a plain ``pip install replmon`` leaves out, by
#: the modules that need them: local runs of the real state machine under moto (``replmon[local]``)
#: and the lab's servers, charts and knees (``replmon[lab]``, which includes local).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "local": ("moto", "moto.stepfunctions"),
    "lab": ("moto", "moto.server", "flask", "minio", "matplotlib", "ruptures"),
}


def extra_of(module: str) -> str | None:
    """The extra that installs ``module`` (a top-level name or a dotted one), or None.

    >>> extra_of("moto.stepfunctions.parser"), extra_of("minio"), extra_of("yaml")
    ('local', 'lab', None)
    """
    top = module.split(".")[0]
    for extra, modules in EXTRA_MODULES.items():
        if any(m.split(".")[0] == top for m in modules):
            return extra
    return None


def missing_extra_message(command: str, extra: str, missing: list[str] | tuple[str, ...]) -> str:
    return (f"replmon {command} needs the {extra} extra ({', '.join(missing)} not installed): "
            f"pip install 'replmon[{extra}]'")


def require_extra(extra: str, command: str) -> None:
    """Exit 2 naming the extra to install when one of its modules is missing (before any server or
    run starts: a lab server that cannot import its module only says it exited)."""
    from importlib.util import find_spec

    missing = []
    for name in EXTRA_MODULES[extra]:
        try:
            found = find_spec(name) is not None
        except ModuleNotFoundError:  # a dotted name whose parent is missing
            found = False
        if not found and name.split(".")[0] not in missing:
            missing.append(name)
    if missing:
        fail(missing_extra_message(command, extra, missing))

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


#: The validation library's phrases -> the project's words (errors name the flag and the fix, in
#: plain English; tests/test_operator_cli.py checks no "Input should" reaches a person).
PLAIN = (
    (r"Input should be greater than or equal to (\S+)", r"must be at least \1"),
    (r"Input should be greater than (\S+)", r"must be more than \1"),
    (r"Input should be less than or equal to (\S+)", r"must be at most \1"),
    (r"Input should be less than (\S+)", r"must be less than \1"),
    (r"Input should be a finite number", "must be a finite number (not inf or nan)"),
    (r"Input should be a valid integer(, [^;]*)?", "must be a whole number"),
    (r"Input should be a valid number(, [^;]*)?", "must be a number"),
    (r"Input should be a valid boolean(, [^;]*)?", "must be true or false"),
    (r"Input should be a valid string", "must be text"),
    (r"Input should be (.+)", r"must be \1"),
    (r"String should have at most (\d+) characters?", r"must be at most \1 characters"),
    (r"String should have at least (\d+) characters?", r"must be at least \1 characters"),
    (r"List should have at least (\d+) items?[^;]*", r"needs at least \1"),
    (r"Extra inputs are not permitted", "is not a known field; check its spelling"),
    (r"Field required", "is required"),
    (r"Value error, ", ""),
    (r"Assertion failed, ", ""),
)


def plain(message: str) -> str:
    """A validation message in the project's words: 'must be at least 1', not 'Input should be...'."""
    for pattern, repl in PLAIN:
        message = re.sub(pattern, repl, message)
    return message


def config_message(exc: ConfigError, flags: Mapping[str, str] = FLAGS) -> str:
    """A ConfigError as one line, each field named by its flag where the CLI has one."""
    parts = []
    for line in str(exc).splitlines()[1:]:
        line = line.strip()
        field, _, rest = line.partition(": ")
        field = re.sub(r"^routes\.0\.destinations\.\d+\.", "routes.0.destinations.0.", field)
        parts.append(f"{flags.get(field, field)}: {plain(rest)}" if rest else plain(line))
    return "; ".join(parts)


def check_url(value: str | None, flag: str) -> None:
    if value is not None and not ENDPOINT_URL_RE.fullmatch(value):
        fail(f"{flag}: {value!r} is not an http(s) URL with no path; use e.g. http://127.0.0.1:8000")


def default_spool_dir() -> Path:
    """Where local runs spool records by default: ``$XDG_STATE_HOME/replmon/spool``."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "replmon" / "spool"


def check_output_dir(path: Path | None, flag: str) -> None:
    """A directory to write into: made if missing, refused (exit 2, naming the flag and why) if it is a
    file, cannot be made, or a file cannot really be written in it (a read-only or virtual file system
    such as /proc answers os.access as writable for root, so a file is made and removed)."""
    if path is None:
        return
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        fail(f"{flag}: {path} is a file; give a directory (it is made if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        fail(f"{flag}: cannot make {path}: {exc.strerror}; choose another directory")
    _can_write_in(path, flag, "directory")


def check_output_file(path: Path | None, flag: str) -> None:
    """A file to write: refused (exit 2, naming the flag and why) if it is a directory, or its
    directory is missing or cannot take a file (a file is made and removed there, as for
    :func:`check_output_dir`: /proc answers os.access as writable for root)."""
    if path is None:
        return
    path = path.expanduser()
    if path.is_dir():
        fail(f"{flag}: {path} is a directory; give a file path (e.g. {path / 'report.md'})")
    parent = path.resolve().parent
    if not parent.is_dir():
        fail(f"{flag}: directory {parent} does not exist; create it or choose another path")
    _can_write_in(parent, flag, "path")


def _can_write_in(directory: Path, flag: str, other: str) -> None:
    """A file can be made in ``directory`` (made and removed: /proc answers os.access as writable
    for root), else exit 2 naming ``flag`` and the cause; the fix is another ``other``."""
    if not os.access(directory, os.W_OK | os.X_OK):
        fail(f"{flag}: directory {directory} is not writable; choose another {other}")
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".replmon-check-"):
            pass
    except OSError as exc:
        from replmon.core.files import describe_os_error

        fail(f"{flag}: cannot write in {directory}: {describe_os_error(exc, directory)}; choose another {other}")


def read_capped(path: Path, limit: int) -> bytes:
    """``path`` ('-': stdin) whole, read to at most ``limit`` + 1 bytes (so /dev/zero or a wrong
    multi-GB file ends in one line, not in memory: more than ``limit`` means too large). OSError passes."""
    if str(path) == "-":
        return sys.stdin.buffer.read(limit + 1)
    with path.open("rb") as fh:
        return fh.read(limit + 1)


def keys_from_env(prefix: str, env: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """S3-compatible endpoints' keys from ``<prefix>ACCESS_KEY_ID`` and ``<prefix>SECRET_ACCESS_KEY``
    (both or neither): never from a flag, where `ps` and shell history would show the secret."""
    access, secret = env.get(f"{prefix}ACCESS_KEY_ID") or None, env.get(f"{prefix}SECRET_ACCESS_KEY") or None
    if bool(access) != bool(secret):
        have, missing = (f"{prefix}ACCESS_KEY_ID", f"{prefix}SECRET_ACCESS_KEY") if access else (f"{prefix}SECRET_ACCESS_KEY", f"{prefix}ACCESS_KEY_ID")
        fail(f"{have} is set but {missing} is not: an access key and its secret go together; set both (or neither, "
             "for AWS's credential chain)")
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


def clock_skew_faults(routes: list[Any], stores: Any) -> list[str]:
    """The prober's clock against each endpoint's (core/skew.py): a warning line per endpoint past
    30 s; past S3's 15 minutes the run is refused (exit 3) with the reason, before anything is written."""
    from replmon.adapters.serverclock import server_skew

    lines: list[str] = []
    seen: set[str] = set()
    for route in routes:
        for role, ep in [("source", route.source), *[("destination", d) for d in route.destinations]]:
            where = ep.endpoint_url or f"S3 in {ep.region or 'the default Region'}"
            if where in seen:
                continue
            seen.add(where)
            client = getattr(stores(ep), "control", None)
            skew = server_skew(client, ep.bucket, f"the {role} {where}") if client is not None else None
            if skew is None or skew.verdict == "ok":
                continue
            if skew.verdict == "refuse":
                fail(skew.message(), INFRASTRUCTURE)
            lines.append(skew.message())
    return lines


def stack_outputs(stack: str, region: str | None, profile: str | None) -> dict[str, str]:
    """A deployed replmon stack's CloudFormation outputs (LatencyTableName, SourceBucket...)."""
    from replmon.adapters import clients

    try:
        cfn = clients.client("cloudformation", clients.CONTROL, region=region, profile=profile)
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:
        fail(f"--stack-name {stack}: {explain(exc)}", INFRASTRUCTURE)
    return {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}


def run_verdicts(records: list[ProbeRecord], routes: list[str], planned: int, execution_ok: bool, target_seconds: float,
                 now: float | None = None) -> list[RouteJudgement]:
    """A probe run's verdict per route (signals/verdict.py); records missing count on the first route."""
    import time

    now = time.time() if now is None else now
    missing_at = routes[0] if routes else None
    out = []
    for route in routes:
        others = sum(1 for r in records if r.route != route)
        out.append(judge_run(route, records, target_seconds=target_seconds, planned=planned - others if route == missing_at else None,
                             execution_ok=execution_ok, now=now))
    return out


def exit_code(records: list[ProbeRecord], planned: int, execution_ok: bool, target_seconds: float | None = None) -> int:
    """1 if replication was seen failing or late; else 3 if anything could not be measured or recorded; else 0."""
    target = target_seconds if target_seconds is not None else (records[0].target_seconds if records else 900.0)
    routes = sorted({r.route for r in records}) or ["-"]
    return combine(Exit.from_verdict(v.verdict) for v in run_verdicts(records, routes, planned, execution_ok, target))


def run_exit_code(records: list[ProbeRecord], planned: int, execution_ok: bool, could_not_record: bool,
                  target_seconds: float | None = None) -> int:
    """:func:`exit_code`, with "could not record" (5) ranked after a measured failure (1): a late or
    failing replication is the news; a record not in the store comes before an unmeasured probe."""
    code = exit_code(records, planned, execution_ok, target_seconds)
    if code == MEASURED_FAILURE or not could_not_record:
        return code
    return NOT_RECORDED
