"""RecordResult: turn the finished probe state into a record (its key comes from the plan)."""

from __future__ import annotations

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.probe.polling import PollPolicy
from replmon.probe.state import ProbeState


def to_record(state: ProbeState, retention_days: int = 90, interrupted: str | None = None) -> ProbeRecord:
    """The record of ``state``; ``interrupted`` names the signal when an operator stopped a local run."""
    up, poll = state.upload, state.poll
    rec = ProbeRecord(
        route=state.route.name,
        probe_id=state.probe_id,
        run_id=state.run_id,
        planned_at=state.planned_at,
        size_bytes=state.size_bytes,
        size_class=state.size_class,
        trial=state.trial,
        status=ProbeStatus.ERROR,
        target_seconds=state.target_seconds,
        retention_days=retention_days,
    )
    if up:
        rec.put_end = up.put_end
        rec.put_seconds = up.put_end - up.put_start
        rec.upload_method = up.method
    if poll:
        rec.head_count = poll.head_count
        rec.destinations = [d.model_dump() for d in poll.destinations]
        rec.failure_reason = poll.failure_reason
    if interrupted and (poll is None or not poll.status.judged):
        rec.status = ProbeStatus.INTERRUPTED
        rec.latency_lo = poll.last_pending if poll and poll.last_pending is not None else None
        rec.failure_reason = f"Interrupted: {interrupted} stopped the run before the probe settled"
        return rec
    if state.error:
        rec.failure_reason = f"{state.error.get('Error', 'Error')}: {str(state.error.get('Cause', ''))[:1000]}"
        return rec
    if poll is None or not poll.status.judged:
        rec.failure_reason = rec.failure_reason or "polling ended without a final status"
        return rec
    rec.status = poll.status
    # Nothing replicates before the PUT ends: with no PENDING answer seen the lower bound is 0.
    rec.latency_lo = poll.last_pending if poll.last_pending is not None else 0.0
    if rec.status is ProbeStatus.COMPLETED:
        rec.latency_hi = poll.first_final
        if rec.latency_hi is not None:
            rec.bound_seconds = PollPolicy(state.poll_settings.floor_seconds, state.poll_settings.relative).bound(rec.latency_hi)
    return rec
