"""Loopback servers the lab starts and always stops: MinIO (x2) and DynamoDB Local."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
USER, PASSWORD = "replmon", "replmon-lab-secret"  # loopback-only lab credentials


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
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            # Own process group: stop() reaches every child (DynamoDB Local's JVM, MinIO's workers).
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **self.env},
                                         start_new_session=True)

    def wait_ready(self, timeout: float = 90.0) -> None:
        assert self.proc is not None, "start() first"
        _wait_http(self.url + self.health, self.proc, self.log, timeout, self.ready_codes)

    def stop(self, grace: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGCONT)  # a paused server cannot act on SIGTERM
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(grace)

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


def minio(name: str, data: Path, logs: Path) -> Server:
    port, console = free_port(), free_port()
    data.mkdir(parents=True, exist_ok=True)
    return Server(
        name=name,
        port=port,
        argv=[str(tool("minio")), "server", str(data), "--address", f"{LOOPBACK}:{port}", "--console-address", f"{LOOPBACK}:{console}", "--quiet"],
        env={"MINIO_ROOT_USER": USER, "MINIO_ROOT_PASSWORD": PASSWORD, "MINIO_UPDATE": "off", "MINIO_BROWSER": "off",
             "MINIO_CALLHOME_ENABLE": "off"},
        log=logs / f"{name}.log",
        health="/minio/health/live",
    )


def dynamodb_local(data: Path, logs: Path) -> Server:
    home = cache_dir() / "dynamodb-local-2.5.4"
    if not (home / "DynamoDBLocal.jar").exists():
        raise LabError(f"DynamoDB Local is missing under {home}: run scripts/lab-deps.sh")
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return Server(
        name="dynamodb-local",
        port=port,
        argv=["java", f"-Djava.library.path={home / 'lib'}", "-Xmx512m",
              "-cp", f"{home / 'DynamoDBLocal.jar'}:{home / 'lib'}/*", "com.amazonaws.services.dynamodbv2.local.main.ServerRunner",
              "-port", str(port), "-dbPath", str(data), "-sharedDb", "-disableTelemetry"],
        env={},
        log=logs / "dynamodb-local.log",
        ready_codes=(200, 400),  # any HTTP answer (400 to a bare GET) means it is listening
    )


def mc(config_dir: Path, *args: str) -> str:
    r = subprocess.run([str(tool("mc")), "--config-dir", str(config_dir), "--quiet", "--no-color", *args],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise LabError(f"mc {' '.join(args)} failed: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout
