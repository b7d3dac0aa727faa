"""Loopback servers the lab starts and always stops: MinIO (x2), DynamoDB Local, Toxiproxy.

A server's life is tied to the lab's: each is started with a parent-death signal (SIGKILL when
the process that started it dies, even by SIGKILL), in its own process group (stop() reaches its
children), and is listed in the lab directory's pidfile, which the next start reads to stop any
server a crashed lab left behind. Every server binds 127.0.0.1 only.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1


class LabError(RuntimeError):
    """A lab server could not be started or configured; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("REPLMON_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "replmon")


def tool(name: str) -> Path:
    path = cache_dir() / "bin" / name
    if not path.exists():
        raise LabError(f"{path} is missing: run scripts/lab-deps.sh (make demo and make test run it for you)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: SIGKILL this process when the lab process dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()  # own process group: stop() signals the whole group
    os.umask(0o077)  # what a server writes (data, logs, its temporary files) is the owner's alone


#: The only variables a lab server inherits from the lab's environment: no AWS_*,
#: REPLMON_* or other secrets of the shell that started the lab reach a server.
INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "JAVA_HOME")


def server_env(own: dict[str, str], tmp: Path | None = None) -> dict[str, str]:
    """A server's whole environment: the few harmless variables above, its temporary directory
    (inside the lab directory: nothing is left in /tmp, even after SIGKILL) and its own settings."""
    env = {k: os.environ[k] for k in INHERITED if k in os.environ}
    if tmp is not None and tmp.is_dir():
        env["TMPDIR"] = str(tmp)
    return {**env, **own}


class _Spawner:
    """Starts every server from one long-lived thread. The parent-death signal fires when the
    *thread* that forked the child exits (prctl(2)), so a server started from a short-lived
    thread (a test's helper restarting it) would be killed when that thread ends."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _run(self) -> None:
        while True:
            job, reply = self._jobs.get()
            try:
                reply.put((True, job()))
            except BaseException as exc:  # handed back to the caller
                reply.put((False, exc))

    def call(self, job: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="replmon-lab-spawner", daemon=True)
                self._thread.start()
        reply: queue.Queue[Any] = queue.Queue()
        self._jobs.put((job, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_spawner = _Spawner()


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks (/proc/<pid>/stat field 22): tells a live server
    of ours from an unrelated process that reused its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0, ok: tuple[int, ...] = (200,)) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{url} server exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status in ok:
                    return
        except urllib.error.HTTPError as e:
            if e.code in ok:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise LabError(f"{url} did not answer within {timeout:.0f} s; see {log}")


@dataclass
class Server:
    name: str
    port: int
    argv: list[str]
    env: dict[str, str]
    log: Path
    health: str = "/"  # answered once the server is ready
    ready_codes: tuple[int, ...] = (200,)
    scratch: Path | None = None  # removed once the server has stopped
    tmp: Path | None = None  # its temporary directory (TMPDIR), inside the lab directory
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.tmp is not None:
            self.tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = server_env(self.env, self.tmp)

        def spawn() -> subprocess.Popen[bytes]:
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "ab") as out:
                return subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, preexec_fn=_die_with_parent)

        self.proc = _spawner.call(spawn)

    def wait_ready(self, timeout: float = 90.0) -> None:
        assert self.proc is not None, "start() first"
        _wait_http(self.url + self.health, self.proc, self.log, timeout, self.ready_codes)

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(grace)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def pause(self) -> None:
        """SIGSTOP: the server hangs (connections open, nothing answers), like a partitioned region."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pid_entry(self) -> dict[str, object]:
        assert self.proc is not None
        return {"name": self.name, "pid": self.proc.pid, "start_ticks": _start_ticks(self.proc.pid)}


class Pidfile:
    """``<lab dir>/servers.json``: the servers a lab started, so the next one can stop leftovers."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, servers: list[Server]) -> None:
        from replmon.core.files import write_atomic

        write_atomic(self.path, json.dumps([s.pid_entry() for s in servers if s.proc is not None]).encode())

    def stop_stale(self) -> list[str]:
        """SIGKILL the process group of every listed server still alive (same pid and start time)."""
        if not self.path.exists():
            return []
        stopped = []
        try:
            entries = json.loads(self.path.read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError):  # damaged: it names no process to stop
            entries = []
        for e in entries if isinstance(entries, list) else []:
            if not isinstance(e, dict):
                continue
            pid, ticks = e.get("pid"), e.get("start_ticks")
            if not (isinstance(pid, int) and pid > 1 and isinstance(ticks, int)):
                continue  # only a pid with the start time it had can be signalled (never a reused one)
            if _start_ticks(pid) == ticks:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    stopped.append(f"{e.get('name', '?')} (pid {pid})")
                except ProcessLookupError:
                    pass
        self.path.unlink(missing_ok=True)
        return stopped

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def minio(name: str, data: Path, logs: Path, root_user: str, root_password: str, env: dict[str, str] | None = None) -> Server:
    port, console = free_port(), free_port()
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Server(
        name=name,
        port=port,
        argv=[str(tool("minio")), "server", str(data), "--address", f"{LOOPBACK}:{port}", "--console-address", f"{LOOPBACK}:{console}", "--quiet"],
        # Credentials through the environment, never the command line (visible to every user in /proc).
        env={"MINIO_ROOT_USER": root_user, "MINIO_ROOT_PASSWORD": root_password, "MINIO_UPDATE": "off", "MINIO_BROWSER": "off",
             "MINIO_CALLHOME_ENABLE": "off", **(env or {})},
        log=logs / f"{name}.log",
        tmp=lab_tmp(logs),
        health="/minio/health/live",
        # Deleted objects wait in .minio.sys/tmp/.trash until MinIO purges them in the background;
        # a lab that stops first would leave them (GBs after a mount preset): the server is down, so they go.
        scratch=data / ".minio.sys" / "tmp",
    )


DDB_LOCAL_VERSION = "2.5.4"
#: With -sharedDb, DynamoDB Local keeps every table in this one file under -dbPath (AWS's usage notes).
DDB_LOCAL_FILE = "shared-local-instance.db"
#: The first 16 bytes of every SQLite database file (sqlite.org/fileformat.html); an empty file is an empty database.
SQLITE_HEADER = b"SQLite format 3\x00"


def check_dynamodb_data(data: Path) -> None:
    """DynamoDB Local's database file in ``data`` (the lab's ``dynamodb`` folder), if there is one,
    is a SQLite database: a damaged one is named before any server starts (DynamoDB Local would
    start, then fail every call on it)."""
    db = data / DDB_LOCAL_FILE
    fix = f"move {data} away (the lab then starts an empty latency history) or choose another --dir"
    if db.is_symlink() or (db.exists() and not db.is_file()):
        raise LabError(f"--dir {data.parent}: {db} is not a file; {fix}")
    try:
        with db.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        from replmon.core.files import describe_os_error

        raise LabError(f"--dir {data.parent}: DynamoDB Local's data cannot be read ({describe_os_error(exc, db)}); {fix}") from None
    if head and head != SQLITE_HEADER:
        raise LabError(f"--dir {data.parent}: {db} is not a SQLite database (DynamoDB Local's data, damaged); {fix}")


def dynamodb_local(data: Path, logs: Path) -> Server:
    check_dynamodb_data(data)
    home = cache_dir() / f"dynamodb-local-{DDB_LOCAL_VERSION}"
    if not (home / "DynamoDBLocal.jar").exists() or not (home / "launcher" / "LoopbackDynamoDB.class").exists():
        raise LabError(f"DynamoDB Local or its loopback launcher is missing under {home}: run scripts/lab-deps.sh")
    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    port = free_port()
    tmp = lab_tmp(logs)
    return Server(
        name="dynamodb-local",
        port=port,
        # sqlite4java copies its native library into java.io.tmpdir (881 KiB per start, left there
        # after a SIGKILL): the lab's own tmp, emptied at the next start. No perf-data file in /tmp.
        argv=["java", f"-Djava.library.path={home / 'lib'}", f"-Djava.io.tmpdir={tmp}", "-XX:-UsePerfData", "-Xmx512m",
              "-cp", f"{home / 'launcher'}:{home / 'DynamoDBLocal.jar'}:{home / 'lib'}/*", "LoopbackDynamoDB",
              "-port", str(port), "-dbPath", str(data), "-sharedDb", "-disableTelemetry"],
        env={},
        log=logs / "dynamodb-local.log",
        tmp=tmp,
        ready_codes=(200, 400),  # any HTTP answer (400 to a bare GET) means it is listening
    )


def toxiproxy(logs: Path) -> Server:
    """Toxiproxy (Shopify) on loopback: the lab's network faults (latency, bandwidth, hangs, resets)."""
    port = free_port()
    return Server(name="toxiproxy", port=port, argv=[str(tool("toxiproxy-server")), "-host", LOOPBACK, "-port", str(port)],
                  env={}, log=logs / "toxiproxy.log", health="/version", tmp=lab_tmp(logs))


def sqs_server(logs: Path) -> Server:
    """moto's server (PyPI) on loopback as the lab's SQS: queues, visibility timeouts, redrive to a DLQ."""
    import sys

    port = free_port()
    return Server(name="sqs", port=port, argv=[sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
                  env={"AWS_ACCESS_KEY_ID": "lab", "AWS_SECRET_ACCESS_KEY": "lab"}, log=logs / "sqs.log", health="/moto-api/",
                  tmp=lab_tmp(logs))


def lab_tmp(logs: Path) -> Path:
    """The lab's temporary directory: beside its logs, inside the lab directory."""
    return logs.parent / "tmp"
