"""A loopback TCP proxy whose *total* rate, over every connection, is one token bucket: the lab's
stand-in for a file system's burst throughput (a rate while its credits last, a lower baseline
after), for the ``mountpoint-credits`` target's knee.

Why not Toxiproxy's ``bandwidth`` toxic: it caps each connection on its own, and the rate a mount
gets is then the cap times however many connections its client opens (32 fio jobs through
Mountpoint open dozens), so the level before and after the cap wanders with the client, not with
the cap; the knee came and went from run to run. A file system's credits are one budget for all
its clients, so here every byte, either way, takes its share of one bucket.

The bucket runs in debt: a chunk reserves its bytes at once and its sender sleeps until the rate
has paid for them. Reservations are served in the order they were made (no connection starves),
and a rate change takes effect for every reservation after it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

#: The largest chunk one reservation takes: small enough that 32 connections share the rate finely.
CHUNK = 64 * 1024


class CreditBucket:
    """``rate`` bytes per second over everything that calls :meth:`take`; ``burst_bytes`` may pass
    at once after idleness (a real bucket's depth; small, so the rate is what is seen)."""

    def __init__(self, rate: float, burst_bytes: int = CHUNK) -> None:
        if rate <= 0:
            raise ValueError(f"rate: {rate!r} bytes/s; give a positive rate")
        self._lock = threading.Lock()
        self._rate, self._depth = float(rate), float(burst_bytes)
        self._tokens, self._last = float(burst_bytes), time.monotonic()

    @property
    def rate(self) -> float:
        return self._rate

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate: {rate!r} bytes/s; give a positive rate")
        with self._lock:
            self._refill()
            self._rate = float(rate)

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self._depth, self._tokens + (now - self._last) * self._rate)
        self._last = now

    def reserve(self, n: int) -> float:
        """Take ``n`` bytes' worth now; the seconds to wait before sending them."""
        with self._lock:
            self._refill()
            self._tokens -= n
            return max(0.0, -self._tokens / self._rate)

    def take(self, n: int) -> None:
        wait = self.reserve(n)
        if wait:
            time.sleep(wait)


class CreditProxy:
    """Listens on 127.0.0.1 (an ephemeral port) and forwards to ``127.0.0.1:upstream_port``, every
    byte in both directions through ``bucket``. A context manager; :attr:`port` is where to connect."""

    def __init__(self, upstream_port: int, bucket: CreditBucket) -> None:
        self.upstream_port, self.bucket = upstream_port, bucket
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="credit-proxy", daemon=True)

    def __enter__(self) -> CreditProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._conns_lock:
            conns, self._conns = list(self._conns), set()
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(5)

    def _track(self, s: socket.socket) -> None:
        with self._conns_lock:
            self._conns.add(s)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._track(s)
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        down = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        down.start()
        self._pump(client, upstream)
        down.join()
        with self._conns_lock:
            self._conns.difference_update((client, upstream))
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.close()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(CHUNK):
                self.bucket.take(len(chunk))
                dst.sendall(chunk)
        except OSError:
            pass
        finally:  # one side ended: end the other's writes, so the peer sees the close
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                src.shutdown(socket.SHUT_RD)
