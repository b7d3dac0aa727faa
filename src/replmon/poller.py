"""PollReplication: HEAD the source until its ReplicationStatus settles, keeping the interval.

One invocation polls *inline* (sleeping in-process) while the next HEAD is due within its
``inline_budget_seconds``; a longer gap is handed back to the state machine's Wait state as
``wait_seconds``, so a 30-minute probe costs a few dozen Lambda invocations, not a busy loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from replmon.clock import Clock
from replmon.config import Endpoint
from replmon.polling import PollPolicy, rtt_estimate
from replmon.ports import HeadResult, ObjectStore
from replmon.state import DestinationCheck, Poll, ProbeState

FINAL = ("COMPLETED", "FAILED", "STUCK")


def verify_replicas(state: ProbeState, stores: Callable[[Endpoint], ObjectStore]) -> list[DestinationCheck]:
    """Each destination must hold a REPLICA of the same version, size and ETag."""
    assert state.upload is not None
    checks = []
    for dest in state.route.destinations:
        found: HeadResult | None = stores(dest).head(dest.bucket, state.upload.key, state.upload.version_id)
        checks.append(
            DestinationCheck(
                bucket=dest.bucket,
                status=found.replication_status if found else None,
                size_match=bool(found and found.size == state.size_bytes),
                etag_match=bool(found and found.etag == state.upload.etag),
            )
        )
    return checks


def sleeps_inline(delay: float, used: float, budget: float) -> bool:
    """Sleep ``delay`` inside this invocation (True) or hand it to the Wait state (False)?

    Inside the budget, sleep here. A sub-second gap may overrun the budget rather than become a
    Wait, which counts whole seconds; past the budget, even a sub-second gap is handed back as
    ``wait_seconds = 0``, which the state machine's Choice sends straight back to PollReplication
    (a fresh invocation with a fresh budget).
    """
    return used + delay <= budget or (delay < 1.0 and used <= budget)


def settle(state: ProbeState, poll: Poll, head: HeadResult | None, stores: Callable[[Endpoint], ObjectStore]) -> None:
    """Classify a final (non-PENDING) answer."""
    status = head.replication_status if head else None
    if status == "COMPLETED":
        poll.destinations = verify_replicas(state, stores)
        bad = [d for d in poll.destinations if d.status != "REPLICA" or not (d.size_match and d.etag_match)]
        poll.status = "FAILED" if bad else "COMPLETED"
        if bad:
            poll.failure_reason = "ReplicaMismatch: " + ", ".join(
                f"{d.bucket} status={d.status} size_match={d.size_match} etag_match={d.etag_match}" for d in bad
            )
        return
    poll.status = "FAILED"
    if status == "FAILED":
        poll.failure_reason = "source ReplicationStatus FAILED (see s3:Replication:OperationFailedReplication events)"
    elif head is None:
        poll.failure_reason = "ProbeMissing: the probe object version disappeared from the source"
    else:
        poll.failure_reason = (
            f"NoReplication: source ReplicationStatus is {status!r}; no replication rule covers "
            f"prefix {state.route.prefix!r} of bucket {state.route.source.bucket!r}"
        )


def poll_replication(state: ProbeState, stores: Callable[[Endpoint], ObjectStore], clock: Clock) -> ProbeState:
    if state.upload is None:
        raise ValueError("PollReplication needs the 'upload' that UploadProbe adds; run UploadProbe first")
    up = state.upload
    poll = state.poll = state.poll or Poll()
    settings = state.poll_settings
    policy = PollPolicy(settings.floor_seconds, settings.relative)
    source = stores(state.route.source)
    began = clock.now()

    while True:
        now = clock.now()
        # The interval ends when the answer arrives, so the next HEAD is sent early (polling.py).
        due = min(policy.next_head_at(poll.last_pending, poll.not_before, poll.last_rtt), float(state.timeout_seconds))
        delay = due - (now - up.put_end)
        if delay > 0:
            if not sleeps_inline(delay, now - began, settings.inline_budget_seconds):
                poll.wait_seconds = math.floor(delay)  # whole seconds, rounded down: the gap stays within the policy
                poll.status = "PENDING"
                return state
            clock.sleep(delay)
        sent = clock.now()
        head = source.head(state.route.source.bucket, up.key, up.version_id)
        received = clock.now()
        poll.head_count += 1
        poll.last_rtt = rtt_estimate(poll.last_rtt, received - sent)
        if head is not None and head.replication_status == "PENDING":
            poll.last_pending = sent - up.put_end
            if poll.last_pending >= state.timeout_seconds:
                poll.status = "STUCK"
                poll.failure_reason = f"still PENDING {poll.last_pending:.0f} s after the PUT (timeout {state.timeout_seconds} s)"
                return state
            continue
        poll.first_final = received - up.put_end
        settle(state, poll, head, stores)
        return state


def start_polling(state: ProbeState, not_before: float) -> ProbeState:
    """Initial poll state; ``not_before`` comes from the route's history (polling.earliest_completion)."""
    state.poll = Poll(not_before=not_before)
    return state
