"""PollReplication: HEAD the source until its ReplicationStatus settles, keeping the interval.

One invocation polls *inline* (sleeping in-process) while the next HEAD is due within its
``inline_budget_seconds``; a longer gap is handed back to the state machine's Wait state as
``wait_seconds``, so a 30-minute probe costs a few dozen Lambda invocations, not a busy loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from replmon.core.clock import Clock
from replmon.core.ports import HeadResult, ObjectStore
from replmon.core.record import ProbeStatus
from replmon.core.route import Endpoint
from replmon.probe.polling import PollPolicy, rtt_estimate
from replmon.probe.state import DestinationCheck, Poll, ProbeState


def same_content(source: HeadResult, replica: HeadResult | None, upload_etag: str) -> tuple[bool, str]:
    """Is the replica the source's bytes? Compared by S3's full-object checksum where both sides
    have one (replication keeps it; an SSE-KMS object's ETag is not a content hash and may differ
    on the replica), by ETag only where no checksum exists. Two checksums are compared only when
    they are of the same algorithm **and** type: a COMPOSITE checksum (of the parts' checksums) and
    a FULL_OBJECT one of the same bytes differ, so such a pair is refused, never judged equal
    ("Checking object integrity for data uploads in Amazon S3").

    >>> src = HeadResult("COMPLETED", 3, '"a"', "v", "CRC64NVME/FULL_OBJECT:AAA=")
    >>> same_content(src, HeadResult("REPLICA", 3, '"b"', "v", "CRC64NVME/FULL_OBJECT:AAA="), '"a"')
    (True, 'checksum:CRC64NVME/FULL_OBJECT')
    >>> same_content(HeadResult("COMPLETED", 3, '"a"', "v"), HeadResult("REPLICA", 3, '"a"', "v"), '"a"')
    (True, 'etag')
    >>> same_content(src, HeadResult("REPLICA", 3, '"a"', "v", "CRC64NVME/COMPOSITE:AAA="), '"a"')
    (False, 'checksum:CRC64NVME/FULL_OBJECT vs CRC64NVME/COMPOSITE: not comparable')
    """
    if replica is None:
        return False, "missing"
    if source.checksum and replica.checksum:
        kind, value = source.checksum.split(":", 1)
        replica_kind, replica_value = replica.checksum.split(":", 1)
        if kind != replica_kind:
            return False, f"checksum:{kind} vs {replica_kind}: not comparable"
        return value == replica_value, f"checksum:{kind}"
    return replica.etag == upload_etag, "etag"


def verify_replicas(state: ProbeState, source: HeadResult, stores: Callable[[Endpoint], ObjectStore]) -> list[DestinationCheck]:
    """Each destination must hold a REPLICA of the same version, size and content."""
    assert state.upload is not None
    checks = []
    for dest in state.route.destinations:
        found: HeadResult | None = stores(dest).head(dest.bucket, state.upload.key, state.upload.version_id)
        match, how = same_content(source, found, state.upload.etag)
        checks.append(
            DestinationCheck(
                bucket=dest.bucket,
                status=found.replication_status if found else None,
                size_match=bool(found and found.size == state.size_bytes),
                content_match=match,
                verified_by=how,
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
    if head is not None and status == "COMPLETED":
        poll.source_checksum = head.checksum
        poll.destinations = verify_replicas(state, head, stores)
        bad = [d for d in poll.destinations if d.status != "REPLICA" or not (d.size_match and d.content_match)]
        poll.status = ProbeStatus.FAILED if bad else ProbeStatus.COMPLETED
        if bad:
            poll.failure_reason = "ReplicaMismatch: " + ", ".join(
                f"{d.bucket} status={d.status} size_match={d.size_match} content_match={d.content_match} ({d.verified_by})"
                for d in bad
            )
        return
    poll.status = ProbeStatus.FAILED
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
    # The probe's deadline counts from when its upload began (timeout_seconds bounds the whole probe).
    deadline = state.deadline if state.deadline is not None else up.put_start + state.timeout_seconds

    while True:
        clock.check()
        now = clock.now()
        # The interval ends when the answer arrives, so the next HEAD is sent early (polling.py).
        due = min(policy.next_head_at(poll.last_pending, poll.not_before, poll.last_rtt), deadline - up.put_end)
        delay = due - (now - up.put_end)
        if delay > 0:
            if not sleeps_inline(delay, now - began, settings.inline_budget_seconds):
                poll.wait_seconds = math.floor(delay)  # whole seconds, rounded down: the gap stays within the policy
                poll.status = ProbeStatus.PENDING
                return state
            clock.sleep(delay)
        if head_once(state, source, stores, clock, deadline):
            return state


def head_once(state: ProbeState, source: ObjectStore, stores: Callable[[Endpoint], ObjectStore], clock: Clock, deadline: float) -> bool:
    """One HEAD of the source and what it means for the interval: True when the probe settled
    (COMPLETED/FAILED with its replicas checked, or STUCK past ``deadline``). The probe's poller and
    the heartbeat's (probe/heartbeat.py) both go through here: one interval semantics."""
    assert state.upload is not None and state.poll is not None
    up, poll = state.upload, state.poll
    sent = clock.now()
    head = source.head(state.route.source.bucket, up.key, up.version_id)
    received = clock.now()
    poll.head_count += 1
    poll.last_rtt = rtt_estimate(poll.last_rtt, received - sent)
    if head is not None and head.replication_status == "PENDING":
        poll.last_pending = sent - up.put_end
        if sent >= deadline:
            poll.status = ProbeStatus.STUCK
            poll.failure_reason = (
                f"still PENDING {poll.last_pending:.0f} s after the PUT (timeout {state.timeout_seconds} s from the probe's start)"
            )
            return True
        return False
    poll.first_final = received - up.put_end
    settle(state, poll, head, stores)
    return True


def start_polling(state: ProbeState, not_before: float) -> ProbeState:
    """Initial poll state; ``not_before`` comes from the route's history (polling.earliest_completion)."""
    state.poll = Poll(not_before=not_before)
    return state
