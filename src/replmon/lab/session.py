"""`replmon lab up` / `lab down`: the lab kept running between commands, so `replmon probe` and
`replmon report` can be tried against it without deploying anything.

``up`` starts one supervisor process (``replmon lab serve``, its own session) that holds the lab
(``with Lab(root)``: servers, event path, the directory's lock) until SIGTERM. The servers die
with the supervisor (parent-death signal, lab/servers.py), so nothing outlives it however it
ends. The state file ``<dir>/lab-up.json`` names the supervisor (pid and start time, so a reused
pid is never signalled) and the endpoints; ``<dir>/lab.env`` holds the shell exports and
``<dir>/lab.secret`` the credentials' secret, both readable by the owner only. ``down`` stops
exactly that supervisor (and, if it was killed, exactly the servers its pidfile lists), then
removes the three files. Everything stays inside the lab directory.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replmon.core.files import write_atomic
from replmon.lab.lab import DEST_BUCKET, MARKER, SOURCE_BUCKET, TABLE, Lab, check_layout
from replmon.lab.servers import LabError, Pidfile, _start_ticks, check_dynamodb_data

STATE, ENV, SECRET, LOG = "lab-up.json", "lab.env", "lab.secret", "logs/lab-up.log"
#: What the exports set (lab down unsets the same names).
EXPORTED = ("REPLMON_SOURCE_ENDPOINT", "REPLMON_DEST_ENDPOINT", "REPLMON_SOURCE_BUCKET", "REPLMON_DEST_BUCKET",
            "REPLMON_DYNAMODB_ENDPOINT", "REPLMON_TABLE", "REPLMON_ACCESS_KEY_ID", "REPLMON_SECRET_ACCESS_KEY")


@dataclass(frozen=True)
class Session:
    root: Path
    pid: int
    start_ticks: int | None
    endpoints: dict[str, str]
    bandwidth: str

    @property
    def alive(self) -> bool:
        return self.start_ticks is not None and _start_ticks(self.pid) == self.start_ticks

    def exports(self) -> list[str]:
        """Shell lines for `eval "$(replmon lab up)"`: the secret is read from its file, never printed."""
        values = {"REPLMON_SOURCE_ENDPOINT": self.endpoints["source"], "REPLMON_DEST_ENDPOINT": self.endpoints["destination"],
                  "REPLMON_SOURCE_BUCKET": SOURCE_BUCKET, "REPLMON_DEST_BUCKET": DEST_BUCKET,
                  "REPLMON_DYNAMODB_ENDPOINT": self.endpoints["dynamodb"], "REPLMON_TABLE": TABLE,
                  "REPLMON_ACCESS_KEY_ID": self.endpoints["access_key_id"]}
        lines = [f"export {k}={shlex.quote(v)}" for k, v in values.items()]
        secret = shlex.quote(str((self.root / SECRET).resolve()))
        return [*lines, f'export REPLMON_SECRET_ACCESS_KEY="$(cat {secret})"']


def _private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (0600), whole or not at all (core/files.py: a
    full disk leaves neither a partial file nor a temporary one)."""
    write_atomic(path, text.encode(), mode=0o600)


def read(root: Path) -> Session | None:
    """The session ``lab-up.json`` names; None when there is none or it is not one (a damaged file
    names no process to signal: the next ``up`` starts afresh)."""
    try:
        raw = json.loads((root / STATE).read_bytes().decode("utf-8"))
        endpoints = raw["endpoints"]
        pid, ticks, bandwidth = raw["pid"], raw.get("start_ticks"), raw.get("bandwidth", "100MiB")
        if not (isinstance(pid, int) and pid > 1 and (ticks is None or isinstance(ticks, int)) and isinstance(bandwidth, str)
                and isinstance(endpoints, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in endpoints.items())
                and {"source", "destination", "dynamodb", "access_key_id"} <= set(endpoints)):
            return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return Session(root, pid, ticks, dict(endpoints), bandwidth)


def check_directory(root: Path) -> None:
    """The checks Lab makes when it claims the directory, before a supervisor is started (a
    usage error is reported here, at once)."""
    check_layout(root)
    check_dynamodb_data(root / "dynamodb")


def claim(root: Path) -> None:
    """Make a new or empty ``root`` the lab's (its marker) before anything is written in it: the
    supervisor's Lab then finds its own directory, not a foreign one holding only ``logs/``."""
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not (root / MARKER).exists():
            write_atomic(root / MARKER, json.dumps({"made_by": "replmon lab", "note": "replmon may delete this directory's contents"}).encode())
        (root / "logs").mkdir(exist_ok=True, mode=0o700)
    except OSError as exc:
        from replmon.core.files import describe_os_error

        raise LabError(f"--dir {root} is not writable: {describe_os_error(exc)}") from None


def up(root: Path, bandwidth: str, wait: float = 300.0) -> Session:
    """Start the supervisor and wait until its lab is ready (or say why it is not)."""
    running = read(root)
    if running is not None and running.alive:
        return running
    check_directory(root)
    held = holder(root) if root.is_dir() else None
    if held is not None:  # a `lab run`, or a lab whose lab-up.json is damaged: its files are left alone
        raise LabError(f"--dir {root} is in use by another replmon lab (pid {held}); wait for it or choose another --dir")
    claim(root)
    for name in (STATE, ENV, SECRET):
        (root / name).unlink(missing_ok=True)
    log = root / LOG
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "replmon.cli", "lab", "serve", "--dir", str(root), "--bandwidth", bandwidth],
                                stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "REPLMON_PROGRESS": "0"})
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        session = read(root)
        if session is not None and session.pid == proc.pid:
            return session
        if proc.poll() is not None:
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            why = next((ln.removeprefix("error: ") for ln in reversed(lines) if ln.startswith("error:")), lines[-1] if lines else "")
            raise LabError(f"the lab did not start: {why} (log: {log})")
        time.sleep(0.3)
    proc.terminate()
    raise LabError(f"the lab was not ready within {wait:.0f} s; see {log}")


def serve(root: Path, bandwidth: str) -> None:
    """The supervisor: hold the lab until SIGTERM or SIGINT (raised as Interrupted by the CLI)."""
    from replmon.local.execution import Interrupted

    try:
        with Lab(root, bandwidth=bandwidth) as lab:
            _private(root / SECRET, lab.keys[1] + "\n")
            endpoints = {"source": lab.servers["source"].url, "destination": lab.servers["destination"].url,
                         "dynamodb": lab.servers["dynamodb"].url, "toxiproxy": lab.servers["toxiproxy"].url,
                         "access_key_id": lab.keys[0]}
            session = Session(root, os.getpid(), _start_ticks(os.getpid()), endpoints, bandwidth)
            _private(root / ENV, "\n".join(session.exports()) + "\n")
            _private(root / STATE, json.dumps({"pid": session.pid, "start_ticks": session.start_ticks, "endpoints": endpoints,
                                               "bandwidth": bandwidth, "started_at": time.time()}, indent=1))
            print(f"lab up: {endpoints}", flush=True)
            while True:
                time.sleep(3600)
    except Interrupted as exc:
        print(f"lab down: {exc.signame}", flush=True)
    finally:
        for name in (STATE, ENV, SECRET):
            (root / name).unlink(missing_ok=True)


def down(root: Path, grace: float = 60.0) -> list[str]:
    """Stop what ``up`` started in ``root``; returns what was stopped (empty: nothing was up)."""
    stopped: list[str] = []
    session = read(root)
    if session is not None and session.alive:
        os.kill(session.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while session.alive and time.monotonic() < deadline:
            time.sleep(0.2)
        if session.alive:  # the supervisor hangs: kill it; its servers die with it (parent-death signal)
            os.kill(session.pid, signal.SIGKILL)
            while session.alive and time.monotonic() < deadline + 10:
                time.sleep(0.2)
        stopped.append(f"supervisor (pid {session.pid})")
    if session is not None and _unlocked(root):  # servers a killed supervisor left (never a running `lab run`'s)
        stopped += Pidfile(root / "servers.json").stop_stale()
    for name in (STATE, ENV, SECRET):
        (root / name).unlink(missing_ok=True)
    return stopped


def _unlocked(root: Path) -> bool:
    """No lab holds the directory's lock now."""
    import fcntl

    try:
        with (root / ".lock").open("a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def holder(root: Path) -> str | None:
    """The pid the lab holding ``root``'s lock wrote in it ("?" if unreadable); None when no lab holds it."""
    if not (root / ".lock").is_file() or _unlocked(root):  # (no lock file: none is made here)
        return None
    try:
        text = (root / ".lock").read_bytes().decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "?"


def damaged(root: Path) -> list[Path]:
    """The state files in ``root`` that are there but are not what `lab up` or a lab wrote (cut by a
    full disk, edited by hand): they name no process, so none can be stopped through them."""
    bad = [root / STATE] if (root / STATE).exists() and read(root) is None else []
    pidfile = root / "servers.json"
    try:
        entries = json.loads(pidfile.read_bytes().decode("utf-8"))
        whole = isinstance(entries, list) and all(isinstance(e, dict) and isinstance(e.get("pid"), int) and e["pid"] > 1
                                                  and isinstance(e.get("start_ticks"), int | None) for e in entries)
    except FileNotFoundError:
        whole = True
    except (OSError, ValueError, RecursionError):
        whole = False
    return bad if whole else [*bad, pidfile]


def describe(session: Session) -> dict[str, Any]:
    return {"dir": str(session.root), "supervisor_pid": session.pid, "bandwidth": session.bandwidth,
            "endpoints": {k: v for k, v in session.endpoints.items() if k != "access_key_id"},
            "source_bucket": SOURCE_BUCKET, "dest_bucket": DEST_BUCKET, "table": TABLE,
            "env_file": str(session.root / ENV)}
