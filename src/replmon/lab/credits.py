"""A loopback TCP proxy whose *total* rate, over every connection, is one token bucket: the lab's
stand-in for a file system's burst throughput (a rate while its credits last, a lower baseline
after), for the ``mountpoint-credits`` target's knee. The credits are a balance of bytes
(:class:`BurstCredits`), earned at the baseline rate and spent at the rate used, as EFS documents
its Bursting mode's credits (FSx for Lustre documents credits that accrue below the baseline for
its network; how its disk burst, R4's, is metered it does not say: assumed the same), so the fall
comes when the balance runs out, not at a fixed time: a client that stalls in the burst keeps its
credits and bursts again after the stall.

Why not Toxiproxy's ``bandwidth`` toxic: it caps each connection on its own, and the rate a mount
gets is then the cap times however many connections its client opens (32 fio jobs through
Mountpoint open dozens), so the level before and after the cap wanders with the client, not with
the cap; the knee came and went from run to run. A file system's credits are one budget for all
its clients, so here every byte, either way, takes its share of one bucket.

The bucket runs in debt: a chunk reserves its bytes at once and its sender sleeps until the rate
has paid for them. Reservations are served in the order they were made (no connection starves),
and a rate change takes effect for every reservation after it.

The proxy also counts what it forwarded, per second and direction (:class:`ByteMeter`): the lab's
file system's own series, as FSx publishes DataWriteBytes/DataReadBytes for its clients' bytes. It
is what the throttle really let through, whatever the client made of it: fio's log times writes
as the mount accepts them, and the mount accepts them a part (5 MiB) at a time when one has been
uploaded, so fio's series after the fall is clumps a part wide; the proxy's is the rate itself.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Sequence

from replmon.core.ports import MetricQuery, MetricSeries

#: The largest chunk one reservation takes: small enough that 32 connections share the rate finely.
CHUNK = 64 * 1024


class CreditBucket:
    """``rate`` bytes per second over everything that calls :meth:`take`; ``burst_bytes`` may pass
    at once after idleness (a real bucket's depth; small, so the rate is what is seen)."""

    def __init__(self, rate: float, burst_bytes: int = CHUNK, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0:
            raise ValueError(f"rate: {rate!r} bytes/s; give a positive rate")
        self._lock = threading.Lock()
        self._clock = clock
        self._rate, self._depth = float(rate), float(burst_bytes)
        self._tokens, self._last = float(burst_bytes), clock()

    @property
    def rate(self) -> float:
        return self._rate

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate: {rate!r} bytes/s; give a positive rate")
        with self._lock:
            self._refill()
            self._switch(float(rate))

    def _switch(self, rate: float) -> None:
        """The new rate for every reservation from now on; the debt already reserved keeps the
        time it was given (it is rescaled), so the senders queued before the change are not held
        back again, nor let through early."""
        if self._tokens < 0:
            self._tokens *= rate / self._rate
        self._rate = rate

    def _refill(self) -> float:
        now = self._clock()
        self._tokens = min(self._depth, self._tokens + (now - self._last) * self._rate)
        self._last = now
        return now

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


class BurstCredits(CreditBucket):
    """``burst`` bytes per second while the credit balance lasts, ``baseline`` after it ran out:
    a file system's burst credits, one balance for all its clients. As EFS's Bursting mode (and,
    assumed, FSx for Lustre's disk burst), the balance is earned at the baseline rate and spent at
    the rate used (here every byte either way; EFS meters reads and writes by its own rules): it starts full at
    ``burst_s * (burst - baseline)`` bytes, so a client at the full burst runs it out ``burst_s``
    seconds after :meth:`arm`; one that was slower or stalled runs it out later (what it did not
    spend it kept, up to the full balance), and one that stays under the baseline never does.

    Before :meth:`arm` (mounting, laying the files out) the bucket runs at ``burst`` and counts no
    credits. The fall is one-way: a lab run ends long before an idle client could earn back a
    burst worth measuring. :attr:`exhausted_at` is when the bytes that spent the last credit pass
    (the bucket's clock), :attr:`exhausted_unix` the same in Unix seconds (fio's logs and the
    meter's series are in Unix time); both None while credits last.

    >>> t = [0.0]
    >>> b = BurstCredits(10.0, 2.0, 5.0, clock=lambda: t[0])   # 5 s at 10 B/s: a balance of 40 bytes
    >>> b.arm(); b.balance
    40.0
    >>> t[0] = 1.0; b.reserve(10); b.balance                     # 10 spent (a full balance earns nothing)
    0.0
    30.0
    >>> t[0] = 11.0; b.reserve(5); b.balance                     # idle 10 s: 20 earned, up to the full 40 only
    0.0
    35.0
    >>> t[0] = 12.0; b.reserve(40); b.rate, b.exhausted_at       # 2 earned, 40 spent: ran out at 12 s
    0.0
    (2.0, 12.0)
    """

    def __init__(self, burst: float, baseline: float, burst_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < baseline < burst:
            raise ValueError(f"baseline: {baseline!r} bytes/s; give a positive rate below the burst rate ({burst!r})")
        if burst_s <= 0:
            raise ValueError(f"burst_s: {burst_s!r}; give the seconds a full burst lasts (> 0)")
        super().__init__(burst, clock=clock)
        self.baseline, self.capacity = float(baseline), float(burst_s) * (burst - baseline)
        self._balance, self._earned_to = self.capacity, 0.0
        self.armed_at: float | None = None
        self.exhausted_at: float | None = None
        self.exhausted_unix: float | None = None

    @property
    def balance(self) -> float:
        """The credits left, in bytes (as of the last reservation)."""
        return self._balance

    def arm(self) -> None:
        """Credits are counted from now on (the runner's ``on_io_start``: the measured I/O)."""
        with self._lock:
            self.armed_at = self._earned_to = self._clock()

    def reserve(self, n: int) -> float:
        with self._lock:
            now = self._refill()
            self._tokens -= n
            wait = max(0.0, -self._tokens / self._rate)
            if self.armed_at is not None and self.exhausted_at is None:
                self._balance = min(self.capacity, self._balance + (now - self._earned_to) * self.baseline) - n
                self._earned_to = now
                if self._balance <= 0:  # these bytes spent the last credit: they pass at the burst rate, then the baseline
                    self.exhausted_at, self.exhausted_unix = now + wait, time.time() + wait
                    self._switch(self.baseline)
            return wait


#: Where the meter's series are read from (a MetricReader query's namespace): the lab's stand-in for
#: AWS/FSx, with the same metric names (bytes per period, the Sum statistic).
METER_NAMESPACE = "replmon-lab/Credits"
METER_METRICS = {"DataWriteBytes": "write", "DataReadBytes": "read"}


class ByteMeter:
    """Bytes forwarded per whole Unix second and direction ("write": client to server, "read":
    server to client); a :class:`~replmon.core.ports.MetricReader` over them (``Sum`` per
    ``period``), so the runner reads the lab's file system's own series as it reads CloudWatch's.

    >>> m = ByteMeter()
    >>> m.add("write", 100, at=10.2); m.add("write", 50, at=10.9); m.add("write", 30, at=12.5)
    >>> q = MetricQuery("m0", METER_NAMESPACE, "DataWriteBytes", (), 1, "Sum")
    >>> m.read([q], 0.0, 20.0)[0].points   # a second nothing passed is 0, not missing
    ((10.0, 150.0), (11.0, 0.0), (12.0, 30.0))
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes: dict[str, dict[int, int]] = {d: {} for d in METER_METRICS.values()}

    def add(self, direction: str, n: int, at: float | None = None) -> None:
        second = int(time.time() if at is None else at)
        with self._lock:
            per = self._bytes[direction]
            per[second] = per.get(second, 0) + n

    def read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        out = []
        for q in queries:
            if q.namespace != METER_NAMESPACE or q.metric not in METER_METRICS:
                raise ValueError(f"{q.namespace}/{q.metric}: the credit proxy meters {METER_NAMESPACE} {', '.join(METER_METRICS)}")
            with self._lock:
                per = dict(self._bytes[METER_METRICS[q.metric]])
            if not per:
                out.append(MetricSeries(q.id, ()))
                continue
            first, last = min(per), max(per)
            step = max(1, q.period)
            points = tuple((float(s), float(sum(per.get(x, 0) for x in range(s, s + step))))
                           for s in range(first - first % step, last + 1, step) if start <= s <= end)
            out.append(MetricSeries(q.id, points))
        return out


class CreditProxy:
    """Listens on 127.0.0.1 (an ephemeral port) and forwards to ``127.0.0.1:upstream_port``, every
    byte in both directions through ``bucket``. A context manager; :attr:`port` is where to connect."""

    def __init__(self, upstream_port: int, bucket: CreditBucket) -> None:
        self.upstream_port, self.bucket = upstream_port, bucket
        self.meter = ByteMeter()
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
        with contextlib.suppress(OSError):  # wakes the accept() (closing alone leaves it blocked on Linux)
            self._listener.shutdown(socket.SHUT_RDWR)
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
        down = threading.Thread(target=self._pump, args=(upstream, client, "read"), daemon=True)
        down.start()
        self._pump(client, upstream, "write")
        down.join()
        with self._conns_lock:
            self._conns.difference_update((client, upstream))
        for s in (client, upstream):
            with contextlib.suppress(OSError):
                s.close()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while chunk := src.recv(CHUNK):
                self.bucket.take(len(chunk))
                dst.sendall(chunk)
                self.meter.add(direction, len(chunk))
        except OSError:
            pass
        finally:  # one side ended: end the other's writes, so the peer sees the close
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with contextlib.suppress(OSError):
                src.shutdown(socket.SHUT_RD)
