"""The mountpoint-credits target's throttle (replmon.lab.credits): one rate over every connection,
changed mid-stream. Loopback sockets only; the assertions are lower bounds on time (a loaded
machine only makes the transfer slower), so they hold wherever the suite runs."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from replmon.lab.credits import CreditBucket, CreditProxy

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
    from replmon.lab.credits import CHUNK, METER_NAMESPACE

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
