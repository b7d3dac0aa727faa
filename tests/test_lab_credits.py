"""The mountpoint-credits target's throttle (replmon.lab.credits): one rate over every connection,
changed mid-stream. Loopback sockets only; the assertions are lower bounds on time (a loaded
machine only makes the transfer slower), so they hold wherever the suite runs."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from replmon.core.clock import ManualClock
from replmon.lab.credits import CHUNK, BurstCredits, CreditBucket, CreditProxy

MIB = 2**20


class Sink:
    """A loopback server that reads everything each connection sends and answers with its count."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        with conn:
            n = 0
            while chunk := conn.recv(65536):
                n += len(chunk)
            conn.sendall(str(n).encode())


def send(port: int, nbytes: int) -> int:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"x" * nbytes)
        s.shutdown(socket.SHUT_WR)
        return int(s.recv(64))


def test_the_rate_is_one_budget_over_every_connection() -> None:
    """Four connections of 1 MiB through a 4 MiB/s bucket take about a second together, not a
    quarter of one (a per-connection cap would let each run at 4 MiB/s); every byte arrives."""
    sink = Sink()
    with CreditProxy(sink.port, CreditBucket(4 * MIB)) as proxy:
        got: list[int] = []
        start = time.monotonic()
        threads = [threading.Thread(target=lambda: got.append(send(proxy.port, MIB))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        elapsed = time.monotonic() - start
    assert got == [MIB] * 4
    assert elapsed >= 0.9 * (4 * MIB - 64 * 1024) / (4 * MIB), elapsed


def test_a_lower_rate_takes_hold_mid_stream() -> None:
    """The knee: the same connection, 8 MiB/s then 1 MiB/s; the second MiB after the change takes
    at least a second."""
    sink = Sink()
    bucket = CreditBucket(8 * MIB)
    with CreditProxy(sink.port, bucket) as proxy, socket.create_connection(("127.0.0.1", proxy.port)) as s:
        s.sendall(b"x" * MIB)
        bucket.set_rate(1 * MIB)
        start = time.monotonic()
        s.sendall(b"x" * MIB)
        s.shutdown(socket.SHUT_WR)
        assert int(s.recv(64)) == 2 * MIB
        assert time.monotonic() - start >= 0.8, "the lower rate did not apply to the open connection"


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="rate: 0"):
        CreditBucket(0)


def test_the_meter_counts_what_passed_per_second_and_direction_at_the_rate() -> None:
    """The proxy's own byte counter (the lab's file system's series): 3 MiB through a 2 MiB/s
    bucket are 3 MiB in all, in whole seconds of at most the rate (plus the bucket's one chunk
    of depth) each, the answer counted as read; the runner reads it as it reads CloudWatch."""
    from replmon.core.ports import MetricQuery
    from replmon.lab.credits import METER_NAMESPACE

    sink = Sink()
    with CreditProxy(sink.port, CreditBucket(2 * MIB)) as proxy:
        assert send(proxy.port, 3 * MIB) == 3 * MIB
        time.sleep(0.2)  # the answer's pump counts after it sends
        write, read = proxy.meter.read([MetricQuery("w", METER_NAMESPACE, "DataWriteBytes", (), 1, "Sum"),
                                        MetricQuery("r", METER_NAMESPACE, "DataReadBytes", (), 1, "Sum")], 0, 2e9)
    assert sum(v for _, v in write.points) == 3 * MIB and sum(v for _, v in read.points) == len(str(3 * MIB))
    assert len(write.points) >= 2 and all(v <= 2 * MIB + CHUNK for _, v in write.points), write.points
    with pytest.raises(ValueError, match="DataWriteIOBytes"):
        proxy.meter.read([MetricQuery("x", "AWS/EFS", "DataWriteIOBytes", (), 1, "Sum")], 0, 1)


def spend(bucket: BurstCredits, clock: ManualClock, rate: float, seconds: float, step: float = 0.25) -> None:
    """A client that reserves ``rate`` bytes a second for ``seconds``, in steps of ``step`` s (the
    bucket's clock moved by hand: the credit arithmetic, exact)."""
    for _ in range(round(seconds / step)):
        bucket.reserve(int(rate * step))
        clock.advance(step)


def test_credits_last_burst_s_at_the_full_rate_and_longer_for_a_stalled_client() -> None:
    """A file system's burst credits: earned at the baseline, spent at the rate used, as EFS's
    Bursting mode meters them (EFS user guide, performance, bursting throughput:
    https://docs.aws.amazon.com/efs/latest/ug/performance.html; re:Post,
    https://repost.aws/knowledge-center/efs-choosing-correct-throughput-mode: "When the metered
    throughput is lower than the baseline throughput ... save burst credits ... higher than the
    baseline throughput, this mode uses burst credits"). FSx for Lustre documents such credits for
    its network ("accrue credits when their network bandwidth usage is below their baseline
    limits", https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html), not how its disk
    burst, R4's, is metered: the lab assumes the same. 10 s at
    the full 20 B/s hold 170 bytes (10 x (20 - 3)); a client at the full rate runs them out at 10 s,
    one that stalls 6 s after 4 s of burst keeps what it did not spend (plus 6 s x 3 earned) and
    runs out at 4 + 6 + (170 - 4 x 17 + 18) / 17 = 17.06 s; the rate is the baseline from then on.
    The client reserves a step's bytes at the step's start, so each fall comes at a step's start."""
    full = BurstCredits(20, 3, 10, clock=(clock := ManualClock(0.0)).now)
    full.arm()
    spend(full, clock, 20, 9.75)
    assert full.exhausted_at is None and full.rate == 20
    spend(full, clock, 20, 0.5)
    assert full.exhausted_at == 9.75 and full.rate == 3  # the step that spends the last credit starts at 9.75 s

    stalled = BurstCredits(20, 3, 10, clock=(c := ManualClock(0.0)).now)
    stalled.arm()
    spend(stalled, c, 20, 4)
    c.advance(6)  # the client stalls
    spend(stalled, c, 20, 7)
    assert stalled.exhausted_at is None, "a stall in the burst spent credits it did not use"
    spend(stalled, c, 20, 0.5)
    assert stalled.exhausted_at == 17.0  # 10 + 120 / 17 = 17.06 s in continuous time; in 0.25 s steps, the one at 17.0


def test_credits_count_from_arm_a_slow_client_never_runs_out_and_a_full_balance_earns_nothing() -> None:
    """Mounting and laying out (before ``arm``) spend nothing; a client under the baseline earns
    as much as it spends; an idle full balance stays full (a stall at the start buys no more)."""
    b = BurstCredits(20, 3, 10, clock=(clock := ManualClock(0.0)).now)
    spend(b, clock, 20, 60)  # laying out
    assert b.exhausted_at is None and b.balance == b.capacity == 170
    clock.advance(100)  # idle, full
    b.arm()
    spend(b, clock, 3, 120, step=1.0)  # 3 bytes each second: what a second earns, it spends
    assert b.exhausted_at is None and b.balance == 167  # full, less the step just reserved
    spend(b, clock, 20, 10.5)
    assert b.exhausted_at == 280 + 9.75  # armed at 160, 120 s at the baseline, then as a full client from full


def test_a_burst_credits_bucket_refuses_a_baseline_at_or_above_the_burst() -> None:
    with pytest.raises(ValueError, match="baseline: 20"):
        BurstCredits(20, 20, 10)
    with pytest.raises(ValueError, match="burst_s: 0"):
        BurstCredits(20, 3, 0)


def test_through_the_proxy_the_fall_comes_when_the_credits_ran_out_and_a_stall_moves_it() -> None:
    """Real sockets: 8 MiB/s with 0.5 s of credits over a 1 MiB/s baseline (3.5 MiB): sent without
    a pause they would run out 0.5 s after ``arm``. A client that stalls 1 s after its first MiB
    keeps its credits: they last past its next 3 MiB and run out at least 1.35 s after ``arm`` (the
    worst case: its first MiB reserved only as the stall ends, so the stall earned nothing; then
    2.5 MiB left, spent 7 MiB/s net). The bytes past the fall pass at the baseline: by the model,
    the fall came after 3.5 MiB plus what the baseline earned since ``arm``, so the rest of the
    8 MiB takes at least (rest - one chunk) / 1 MiB/s. Lower bounds only: a loaded machine that
    forwards slower runs the credits out later and leaves fewer bytes past the fall."""
    sink = Sink()
    bucket = BurstCredits(8 * MIB, 1 * MIB, 0.5)
    with CreditProxy(sink.port, bucket) as proxy, socket.create_connection(("127.0.0.1", proxy.port)) as s:
        bucket.arm()
        s.sendall(b"x" * MIB)
        time.sleep(1.0)
        assert bucket.exhausted_at is None and bucket.rate == 8 * MIB
        s.sendall(b"x" * 7 * MIB)
        s.shutdown(socket.SHUT_WR)
        assert int(s.recv(64)) == 8 * MIB
        ended = time.monotonic()
    assert bucket.exhausted_at is not None and bucket.armed_at is not None
    burst_s = bucket.exhausted_at - bucket.armed_at
    assert burst_s >= 1.35, (bucket.exhausted_at, bucket.armed_at)
    past_the_fall = 8 * MIB - (bucket.capacity + bucket.baseline * burst_s) - CHUNK
    assert ended - bucket.exhausted_at >= 0.9 * past_the_fall / bucket.baseline, (burst_s, past_the_fall, ended - bucket.exhausted_at)
    assert bucket.exhausted_unix is not None and abs(bucket.exhausted_unix - time.time()) < 60
