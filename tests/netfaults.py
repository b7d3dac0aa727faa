"""Network faults on loopback for the lab's tests: an endpoint that never answers, and a proxy
that loses the answer to a request after the server has acted on it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self


class _Listener:
    """A loopback TCP listener that hands each accepted connection to ``_take`` on a thread."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self._take(conn)

    def _take(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self.sock.close()


class BlackHole(_Listener):
    """Accepts TCP connections and never answers: a hung server or a partitioned region."""

    def __init__(self) -> None:
        self.held: list[socket.socket] = []
        super().__init__()

    def _take(self, conn: socket.socket) -> None:
        self.held.append(conn)  # read nothing, answer nothing

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for c in self.held:
            c.close()
        super().__exit__(exc_type, exc, tb)


def _read_request(conn: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


class LosingProxy(_Listener):
    """An HTTP/1.1 proxy to ``upstream`` that forwards every request and its answer, except that
    for the first ``lose`` requests matching ``match`` it lets the server act, then closes the
    client's connection instead of answering: a lost answer."""

    def __init__(self, upstream_port: int, match: Callable[[bytes], bool], lose: int = 1) -> None:
        self.upstream_port, self.match, self.lose = upstream_port, match, lose
        self.lost = 0
        super().__init__()

    def _take(self, conn: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                request = _read_request(conn)
                if request is None:
                    return
                # One upstream connection per request, closed by the server after its answer.
                request = request.replace(b"\r\nConnection: keep-alive", b"\r\nConnection: close", 1)
                if b"\r\nconnection:" not in request.lower().split(b"\r\n\r\n")[0]:
                    request = request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10) as up:
                    up.sendall(request)
                    answer = b""
                    while chunk := up.recv(65536):
                        answer += chunk
                if self.lost < self.lose and self.match(request):
                    self.lost += 1
                    return  # the server acted; the client never hears of it
                conn.sendall(answer.replace(b"Connection: close", b"Connection: keep-alive", 1))
