"""Run a probe request through the real state machine locally (moto's ASL interpreter) and
collect its records: what `replmon probe`, the lab and the benchmarks share.

Interrupts: the CLI turns SIGINT and SIGTERM into :class:`Interrupted` in the main thread (see
:func:`interrupts`). The runner then cancels every handler's sleeps and part uploads, stops the
execution, records each probe that had started as INTERRUPTED (unless it was already recorded),
removes its objects and multipart uploads, and raises :class:`RunInterrupted` saying which probes
were recorded, cleaned, or never started.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from replmon.adapters.explain import explain
from replmon.core.clock import CancellableClock
from replmon.core.keys import new_run_id
from replmon.core.record import ProbeRecord
from replmon.core.route import Route
from replmon.local.accounting import RunAccount, account, probe_faults, run_records
from replmon.local.aslrun import FUNCTIONS, ExecutionResult, Invocation, local_state_machine
from replmon.probe.request import ProbeRequest
from replmon.probe.state import ProbeState
from replmon.probe.steps import clean_probe, record_step
from replmon.wiring import Deps

#: Seconds an interrupted run waits for handlers in flight to stop (each checks the cancel event
#: at every sleep and part; a request in flight ends within the clients' read timeouts).
SETTLE_SECONDS = 75.0


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (raised in the main thread, like KeyboardInterrupt)."""

    def __init__(self, signame: str) -> None:
        super().__init__(signame)
        self.signame = signame

    @property
    def exit_code(self) -> int:
        return 128 + int(getattr(signal, self.signame))


@contextmanager
def interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM (what Ctrl-C, `timeout`, CI and systemd send) both raise
    :class:`Interrupted` in the main thread; the previous handlers come back afterwards.

    Only the first signal interrupts: the run then records and cleans up the probes it started,
    which a second Ctrl-C (pressed 50 ms later, or by an impatient supervisor) must not cut short,
    or the in-flight probe's record would be lost. Later signals are acknowledged on stderr and
    ignored; SIGKILL stops everything (the servers die with the process, the next run sweeps)."""
    stopping: list[str] = []

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if stopping:
            sys.stderr.write(f"{name} again: still recording and cleaning up the started probes "
                             f"(at most {SETTLE_SECONDS:.0f} s more); SIGKILL would lose what is in flight\n")
            return
        stopping.append(name)
        raise Interrupted(name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@dataclass
class ProbeRun:
    """One local run of a probe request: the execution, its records (from the store, or rebuilt
    from the run's own RecordResult inputs where the store does not hold them) and where each
    planned probe's record went (local/accounting.py)."""

    run_id: str
    execution: ExecutionResult
    records: list[ProbeRecord]
    seconds: float
    account: RunAccount = field(default_factory=RunAccount)

    @property
    def failed_iterations(self) -> int:
        """Probes whose steps failed beyond their retries: moto reports them as None results (AWS
        fails the Map); the Map keeps only their count, so: probes that never reached Cleanup."""
        results = (self.execution.output or {}).get("results")
        if isinstance(results, list):
            return sum(1 for r in results if not isinstance(r, dict))
        cleaned = {i.event.get("probe_id") for i in self.execution.invocations if i.function == "Cleanup"}
        return max(0, self.planned - len(cleaned))

    @property
    def planned(self) -> int:
        results = (self.execution.output or {}).get("results")
        return int(results.get("probes", 0)) if isinstance(results, dict) else len(results or [])

    @property
    def skipped(self) -> list[dict[str, Any]]:
        """Routes this run skipped because another run held their lease (fleet/lease.py)."""
        return list((self.execution.output or {}).get("skipped") or [])


@dataclass
class Salvage:
    """What an interrupted run did with each probe."""

    signame: str
    run_id: str = ""
    recorded: dict[str, str] = field(default_factory=dict)  # probe id -> stored | duplicate | spooled | error text
    cleaned: dict[str, dict[str, int]] = field(default_factory=dict)
    cleanup_failures: dict[str, list[str]] = field(default_factory=dict)
    not_started: list[str] = field(default_factory=list)
    unsettled: bool = False  # handlers were still running when the runner gave up waiting
    leases_kept: list[str] = field(default_factory=list)  # leases it could not give back, one line each with the expiry


class RunInterrupted(Exception):
    def __init__(self, salvage: Salvage) -> None:
        super().__init__(f"interrupted by {salvage.signame}")
        self.salvage = salvage


def _cancellable(deps: Deps, function_deps: Mapping[str, Deps] | None, cancel: threading.Event) -> dict[str, Deps]:
    """Each state machine function's wiring (its own from ``function_deps``, else ``deps``), with
    a clock whose sleeps end when ``cancel`` is set."""
    own = function_deps or {}
    from replmon.fleet.lease import local_owner

    owner = local_owner()  # on each lease this run takes: a later run can tell when this process is gone
    return {name: dataclasses.replace(d, clock=CancellableClock(d.clock, cancel), run_owner=owner)
            for name in FUNCTIONS for d in [own.get(name, deps)]}


def run_request(
    request: ProbeRequest,
    deps: Deps,
    on_progress: Callable[[int, int], None] | None = None,
    timeout: float = 24 * 3600,
    function_deps: Mapping[str, Deps] | None = None,
) -> ProbeRun:
    """Execute ``request`` (validated by the caller, at its edge) through the real state machine
    and return this run's records.

    ``function_deps`` (function name -> Deps) gives a handler its own wiring (the lab's
    least-privilege users); ``deps`` otherwise. Raises :class:`RunInterrupted` after handling
    an :class:`Interrupted`."""
    # moto logs every failed state at length; the execution result carries the same error.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    from replmon.entry.runtime import quiet_handler_logs

    quiet_handler_logs()  # the handlers' JSON logs: POWERTOOLS_LOG_LEVEL to see them
    total = request.probes
    run_id = request.run_id or new_run_id()
    started = time.time()
    cancel = threading.Event()

    def progress(invocations: list[Invocation]) -> None:
        if on_progress:  # a probe is done when its Cleanup succeeded
            on_progress(sum(1 for i in invocations if i.function == "Cleanup" and i.error is None), total)

    salvage: Salvage | None = None
    with local_state_machine(_cancellable(deps, function_deps, cancel)) as sm:
        arn = sm.start(request.model_copy(update={"run_id": run_id}).to_input())
        try:
            execution = sm.wait(arn, timeout=timeout, poll=0.1, on_poll=progress)
        except Interrupted as intr:
            cancel.set()
            sm.stop(arn, "Interrupted", f"{intr.signame} from the operator")
            salvage = Salvage(intr.signame, run_id, unsettled=not sm.wait_idle(SETTLE_SECONDS))
            salvage_probes(sm.invocations, deps, salvage)
            raise RunInterrupted(salvage) from None
        finally:  # a stopped or timed-out run never reached EndRouteRun: free its routes now, not at `until`
            kept = release_leases(deps, [r.name for r in request.routes], arn, run_id, until=lease_until(sm.invocations))
            if salvage is not None:  # an interrupted run says so too
                salvage.leases_kept = kept
    acc = account(execution)
    acc.leases_kept = kept
    try:
        stored: list[ProbeRecord] | None = collect_records(deps, request.routes, run_id, started)
    except Exception as exc:  # the store died mid-run: the run's own records still make the table
        stored, acc.store_error = None, explain(exc)
    records = run_records(execution, stored, deps.retention_days)
    acc.notes += probe_faults(records)
    return ProbeRun(run_id, execution, records, time.time() - started, acc)


def lease_until(invocations: list[Invocation]) -> float | None:
    """When the leases this run took expire: its BeginRouteRun's answer (``lease.until``)."""
    for i in invocations:
        if i.function == "BeginRouteRun" and isinstance(i.result, dict):
            until = (i.result.get("lease") or {}).get("until")
            return float(until) if isinstance(until, (int, float)) else None
    return None


def release_leases(deps: Deps, routes: list[str], holder: str, run: str | None = None, until: float | None = None) -> list[str]:
    """Give back ``holder``'s leases (a no-op for leases EndRouteRun, or each route's last probe,
    already gave back). Returns one line per lease still held by this run that could not be given
    back, with its expiry (read from the lease, else ``until``, the run's own BeginRouteRun answer):
    the run says so (exit 5) rather than leave the route skipped silently."""
    from replmon.core.files import describe_os_error

    if deps.leases is None:
        return []
    kept: list[str] = []
    for name in routes:
        try:
            deps.leases.release(name, holder, time.time(), run=run)
        except Exception as exc:  # it expires at its `until`: say when, and how to end it now
            expires = until
            try:
                lease = deps.leases.leases([name]).get(name)
            except Exception:  # the store is gone: the expiry is the one BeginRouteRun set
                lease = None
            else:
                if lease is None or lease.holder != holder:
                    continue  # not this run's lease (released meanwhile, or never taken): nothing held
                expires = lease.until or until
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires)) if expires else "its expiry (unknown)"
            why = " ".join(describe_os_error(exc).split())[:200]  # a full disk: 'ENOSPC (disk full): <path>'
            logging.getLogger("replmon").warning("lease not released", extra={"route": name, "error": why, "until": expires})
            kept.append(f"lease of route {name} not released ({why}); it blocks the route's runs "
                        f"until {when}, or until replmon fleet release {name}")
    return kept


def collect_records(deps: Deps, routes: list[Route], run_id: str, started: float) -> list[ProbeRecord]:
    records = [r for route in routes for r in deps.store.query(route.name, started - 60, time.time() + 60) if r.run_id == run_id]
    return sorted(records, key=lambda r: (r.size_bytes, r.trial))


def latest_states(invocations: list[Invocation]) -> tuple[list[ProbeState], dict[str, dict[str, Any]], set[str]]:
    """The plan, each probe's latest state, and the probes whose Cleanup completed."""
    plan = next((i.result for i in reversed(invocations) if i.function == "PlanProbes" and isinstance(i.result, dict)), None)
    probes = [ProbeState.model_validate(p) for p in (plan or {}).get("probes", [])]
    latest: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    for inv in invocations:  # in completion order
        pid = inv.event.get("probe_id")
        if not pid:
            continue
        if inv.function == "Cleanup" and inv.error is None:
            done.add(pid)
        elif isinstance(inv.result, dict) and inv.result.get("probe_id") == pid:
            latest[pid] = inv.result
        else:
            latest.setdefault(pid, inv.event)
    return probes, latest, done


def salvage_probes(invocations: list[Invocation], deps: Deps, salvage: Salvage) -> None:
    """Record each started probe as INTERRUPTED (or as it was, if it had settled) and clean it up."""
    probes, latest, done = latest_states(list(invocations))
    for probe in probes:
        pid = probe.probe_id
        if pid in done:
            continue
        if pid not in latest:
            salvage.not_started.append(pid)
            continue
        state = latest[pid]
        try:
            salvage.recorded[pid] = str(record_step(state, deps, interrupted=salvage.signame)["recorded"])
        except Exception as exc:  # the store and the spool both failed: say so
            salvage.recorded[pid] = f"not recorded ({type(exc).__name__}: {exc})"
        cleaned, failures = clean_probe(ProbeState.model_validate(state), deps)
        salvage.cleaned[pid] = cleaned
        if failures:
            salvage.cleanup_failures[pid] = failures


class PreflightError(RuntimeError):
    """An endpoint, bucket, credential or store problem found before any probe is written."""


def preflight(request: ProbeRequest, deps: Deps) -> None:
    """Reach every bucket and the store first (``deps`` from wiring.preflight_deps: short timeouts,
    one attempt), so a bad flag or a dead endpoint is reported within seconds and nothing is
    written anywhere."""
    for route in request.routes:
        for role, ep in [("source", route.source), *[("destination", d) for d in route.destinations]]:
            where = f"{role} bucket {ep.bucket!r}" + (f" at {ep.endpoint_url}" if ep.endpoint_url else "")
            try:
                deps.stores(ep).check_bucket(ep.bucket)
            except Exception as exc:
                raise PreflightError(f"{where}: {explain(exc)}") from None
        try:
            deps.store.query(route.name, 0, 1, limit=1)
        except Exception as exc:
            raise PreflightError(f"latency store: {explain(exc)}") from None


def salvage_summary(s: Salvage) -> list[str]:
    """Lines for stderr: what happened to each probe of an interrupted run."""
    lines = [f"interrupted by {s.signame}"]
    for pid, how in s.recorded.items():
        cleaned = sum(s.cleaned.get(pid, {}).values())
        lines.append(f"  {pid}: recorded ({how}), {cleaned} object versions/uploads removed"
                     + (f"; NOT removed: {'; '.join(s.cleanup_failures[pid])}" if pid in s.cleanup_failures else ""))
    if s.not_started:
        lines.append(f"  {len(s.not_started)} probe(s) never started (nothing to record or remove)")
    if s.unsettled:
        lines.append("  some steps were still running after the settle time; their probes may need the next run's sweep")
    lines += [f"  {line}" for line in s.leases_kept]
    return lines
