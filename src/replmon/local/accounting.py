"""Where every planned probe of a local run went: stored, spooled for replay, or lost (with its
cause), and the run's records even when the store is gone (docs/SEMANTICS.md "Could
not record").

A local run reads its records back from the latency store. When the store is unreachable at the
end (killed mid-run), the records are rebuilt from the state machine's own RecordResult inputs, the
very records the handlers stored or spooled, so the table is still printed; and the run's faults
are summed up as one line per cause ("disk full", "store unreachable", "N records spooled").

>>> cause_of("ClientError: An error occurred (XMinioStorageFull) when calling the PutObject operation")
'disk full'
>>> cause_of("StoreUnavailable: Could not connect to the endpoint URL")
'store unreachable'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from replmon.core.record import ProbeRecord
from replmon.local.aslrun import ExecutionResult, Invocation
from replmon.probe.results import to_record
from replmon.probe.state import ProbeState

DISK_FULL_SIGNS = ("no space left", "storagefull", "enospc", "errno 28", "disk quota", "edquot", "storage full")
STORE_SIGNS = ("storeunavailable", "could not connect", "endpointconnectionerror", "connection refused", "connectionrefused",
               "connect timeout", "read timeout", "connectionclosederror", "serviceunavailable", "latency store")


def cause_of(text: str) -> str:
    """A failure's cause in the words of the run's summary: 'disk full', 'store unreachable' or 'other'."""
    t = text.lower().replace(" ", "").replace("_", "")
    if any(s.replace(" ", "") in t for s in DISK_FULL_SIGNS):
        return "disk full"
    if any(s.replace(" ", "") in t for s in STORE_SIGNS):
        return "store unreachable"
    return "other"


@dataclass
class Outcome:
    probe_id: str
    recorded: str  # stored | duplicate | spooled | lost | not started
    cause: str | None = None  # why it was spooled or lost, as the step said it

    @property
    def durable(self) -> bool:
        """Held by the store or the spool (a later run replays the spool)."""
        return self.recorded in ("stored", "duplicate", "spooled")


@dataclass
class RunAccount:
    """Every planned probe's outcome, the causes, and notes the caller adds (a file not written)."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    store_error: str | None = None  # the store could not be read at the end of the run
    notes: list[str] = field(default_factory=list)  # one line per extra fault (run file, chart, leftover check)
    not_written: list[str] = field(default_factory=list)  # files the run could not write (the run file)
    leases_kept: list[str] = field(default_factory=list)  # leases the run could not give back: one line each, with expiry

    def count(self, recorded: str) -> int:
        return sum(1 for o in self.outcomes.values() if o.recorded == recorded)

    @property
    def lost(self) -> list[Outcome]:
        return [o for o in self.outcomes.values() if o.recorded == "lost"]

    @property
    def could_not_record(self) -> bool:
        """Anything not held by the store: a record spooled or lost, or a run file not written."""
        return bool(self.lost or self.count("spooled") or self.not_written or self.leases_kept)

    def lines(self, spool: str | None = None, store: str | None = None) -> list[str]:
        """One line per cause, for stderr (and the JSON document's ``faults``); ``store`` names the
        latency store's endpoint in the line of records it did not take."""
        out = []
        lost_by_cause = Counter(cause_of(o.cause or "") for o in self.lost)
        for cause, n in sorted(lost_by_cause.items()):
            example = next(o.cause for o in self.lost if cause_of(o.cause or "") == cause)
            out.append(f"{cause}: {n} record(s) LOST, neither stored nor spooled ({(example or '?')[:160]})")
        spooled = self.count("spooled")
        if spooled:
            where = f" in {spool}" if spool else ""
            at = f" at {store}" if store else ""
            said = next((o.cause for o in self.outcomes.values() if o.recorded == "spooled" and o.cause), None)
            out.append(f"store unreachable: {spooled} record(s) spooled for replay{where}: the latency store{at} did not take them"
                       + (f": {said[:200]}" if said else "") + "; the next run replays them (nothing lost)")
        if self.store_error:
            out.append(f"store unreachable at the end of the run ({self.store_error[:160]}); "
                       "the table is built from the run's own records")
        return out + self.leases_kept + self.notes

    def to_json(self) -> dict[str, Any]:
        return {"recorded": dict(Counter(o.recorded for o in self.outcomes.values())),
                "lost": [{"probe_id": o.probe_id, "cause": o.cause} for o in self.lost],
                "store_error": self.store_error, "not_written": self.not_written,
                "leases_kept": self.leases_kept, "faults": self.lines()}


def probe_faults(records: list[ProbeRecord]) -> list[str]:
    """Probes that could not be measured for a cause the summary names (a full disk, the store):
    their records say so one by one; here, one line per cause."""
    from replmon.core.record import ProbeStatus

    by_cause: dict[str, list[ProbeRecord]] = {}
    for r in records:
        if r.status is ProbeStatus.ERROR and r.failure_reason and cause_of(r.failure_reason) != "other":
            by_cause.setdefault(cause_of(r.failure_reason), []).append(r)
    return [f"{cause}: {len(rs)} probe(s) could not be measured ({(rs[0].failure_reason or '')[:160]})"
            for cause, rs in sorted(by_cause.items())]


def planned_probes(invocations: list[Invocation]) -> list[ProbeState]:
    plan = next((i.result for i in reversed(invocations) if i.function == "PlanProbes" and isinstance(i.result, dict)), None)
    return [ProbeState.model_validate(p) for p in (plan or {}).get("probes", [])]


def _error_text(state: dict[str, Any], key: str) -> str | None:
    err = state.get(key)
    if not isinstance(err, dict):
        return None
    return f"{err.get('Error', 'Error')}: {str(err.get('Cause', ''))[:300]}"


def account(execution: ExecutionResult) -> RunAccount:
    """Each planned probe's outcome, from the execution's Map results and its invocations."""
    invocations = list(execution.invocations)
    results = {r["probe_id"]: r for r in (execution.output or {}).get("results") or [] if isinstance(r, dict) and "probe_id" in r}
    acc = RunAccount()
    for probe in planned_probes(invocations):
        pid = probe.probe_id
        mine = [i for i in invocations if i.event.get("probe_id") == pid]
        recorded = [i for i in mine if i.function == "RecordResult"]
        done = next((i for i in reversed(recorded) if i.error is None and isinstance(i.result, dict)), None)
        if pid in results and results[pid].get("recorded") != "lost":
            how = str(results[pid]["recorded"])
            acc.outcomes[pid] = Outcome(pid, how, _spool_cause(recorded, done) if how == "spooled" else None)
        elif done is not None:
            how = str(done.result.get("recorded") or "stored")
            acc.outcomes[pid] = Outcome(pid, how, _spool_cause(recorded, done) if how == "spooled" else None)
        elif recorded:  # RecordResult failed on every attempt: the store and the spool both refused it
            last = cleanup_event(mine)
            acc.outcomes[pid] = Outcome(pid, "lost", (last and _error_text(last, "record_error")) or recorded[-1].failure or "?")
        elif mine:
            acc.outcomes[pid] = Outcome(pid, "lost", f"{mine[-1].function} failed: {mine[-1].failure or '?'} (no record was written)")
        else:
            acc.outcomes[pid] = Outcome(pid, "not started")
    return acc


def cleanup_event(mine: list[Invocation]) -> dict[str, Any] | None:
    return next((i.event for i in reversed(mine) if i.function == "Cleanup"), None)


def _spool_cause(recorded: list[Invocation], done: Invocation | None) -> str:
    """Why the store did not take a spooled record: the error RecordResult met (it names the table
    and, for a connection, the endpoint), else the step's own failure."""
    said = done.result.get("spooled_because") if done is not None and isinstance(done.result, dict) else None
    if said:
        return str(said)
    failed = [i.failure for i in recorded if i.error]
    return str(failed[-1]) if failed else "the store was unavailable"


def run_records(execution: ExecutionResult, stored: list[ProbeRecord] | None, retention_days: int) -> list[ProbeRecord]:
    """The run's records: the store's (``stored``; None when it could not be read), and for every
    probe the store does not hold, the record RecordResult was given (what was spooled or lost)."""
    held = {r.probe_id: r for r in stored or []}
    out = list(held.values())
    for probe in planned_probes(list(execution.invocations)):
        if probe.probe_id in held:
            continue
        last = next((i.event for i in reversed(execution.invocations)
                     if i.function == "RecordResult" and i.event.get("probe_id") == probe.probe_id), None)
        if last is not None:
            out.append(to_record(ProbeState.model_validate(last), retention_days))
    return sorted(out, key=lambda r: (r.size_bytes, r.trial))
