"""Nothing lost, nothing doubled, nothing left behind, nothing hangs: faults injected on real servers.

Each test injects one fault into the lab (real MinIO replication, DynamoDB Local, the
real state machine) and checks what the measurement and the buckets look like afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replmon.adapters import clients
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.core.record import ProbeStatus
from replmon.lab.lab import PREFIX, TABLE, Lab
from replmon.local.execution import run_request
from replmon.probe.request import ProbeRequest, load_request
from replmon.signals.inflight import in_flight_probes
from tests.conftest import ROOT
from tests.netfaults import BlackHole, LosingProxy

pytestmark = pytest.mark.lab
REPLMON = [sys.executable, "-m", "replmon.cli"]
#: The store-outage test keeps DynamoDB Local down until a record is spooled; at most this long.
OUTAGE_CAP_S = 120
#: ... and the RecordResult that spools waits at most this long for it to come back: inside the
#: function's 90 s Lambda timeout (probe/plan.py RECORD_INVOCATION_SECONDS), as a deployed one must be.
RESTART_WAIT_S = 60


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with Lab(tmp_path_factory.mktemp("faults") / "lab") as running:
        yield running
    assert all(not s.running for s in running.servers.values())


def payload(lab: Lab, route: str, sizes: str, trials: int = 1, timeout: int = 120, concurrency: int = 1) -> ProbeRequest:
    return load_request({"routes": [lab.route(route)], "sizes": sizes, "trials": trials, "max_concurrency": concurrency, "timeout_seconds": timeout,
                         "poll": {"floor_seconds": 0.1, "use_history": False}})


class SpoolsThenWaits:
    """A spool that, once it holds a record, waits (bounded) for ``restored``: a test's control of
    when the outage ends relative to the run, not a change to what is spooled."""

    def __init__(self, inner: Any, restored: threading.Event) -> None:
        self.inner, self.restored = inner, restored

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def spool(self, record: Any) -> None:
        self.inner.spool(record)
        self.restored.wait(RESTART_WAIT_S)


def test_a_store_outage_mid_run_loses_nothing_doubles_nothing_leaves_nothing(lab: Lab) -> None:
    """DynamoDB Local is killed after the first record and comes back once a later record has met
    the outage (8 s at least): records written meanwhile go to the spool and this run's
    Housekeeping replays them."""
    store, ddb = lab.store(), lab.servers["dynamodb"]
    route = "outage"
    met: dict[str, float] = {}
    restored = threading.Event()
    before = lab.spool().pending()  # the module's lab is shared: count this test's entries only
    fdeps = lab.function_deps()
    # The RecordResult that spools returns only once the store is back, so this run's EndProbe and
    # Housekeeping meet a live store whatever the machine's load (EndProbe's jittered retries can
    # otherwise give up before DynamoDB Local has restarted). The code path is unchanged.
    fdeps["RecordResult"].spool = SpoolsThenWaits(fdeps["RecordResult"].spool, restored)

    def outage() -> None:
        deadline = time.time() + 60
        while time.time() < deadline and not store.query(route, time.time() - 600, time.time() + 60):
            time.sleep(0.05)
        ddb.stop()
        # Down until a record has been spooled, never on a timer alone: the first three probes often
        # end together, and each one's EndProbe retries the down store (4 retries after the first
        # attempt, full-jitter waits of at most 2+4+8+16 s) while holding its Map slot, so probes 4-6
        # start only when those retries give up (caught: LeaseKeptToRunEnd). A 20 s outage could end
        # before any record met it (CI, stop 39).
        down = time.time()
        while time.time() - down < 8 or (lab.spool().pending() == before and time.time() - down < OUTAGE_CAP_S):
            time.sleep(0.2)
        met["down_s"], met["spooled"] = time.time() - down, lab.spool().pending() - before
        try:
            lab.restart("dynamodb")
        finally:  # a failed restart fails the test at its asserts, not after every spooling probe's wait
            restored.set()

    fault = threading.Thread(target=outage, daemon=True)
    fault.start()
    # three probes at a time, six in all: at most three records are stored before the store stops, so
    # a later probe's record always meets the outage
    res = run_request(payload(lab, route, "64MiB", trials=6, concurrency=3), lab.deps(), function_deps=fdeps)
    fault.join(OUTAGE_CAP_S + 30)
    assert not fault.is_alive() and ddb.running
    assert met["spooled"] >= 1, met  # the outage ended because a record met it, not at the cap
    report = res.execution.output["housekeeping"]["report"]["spool"]
    # some records waited in the spool; one whose write the store committed as it was killed (its answer
    # lost, so it was spooled as well) replays as a duplicate: counted once, not twice
    assert report["replayed"] + report["duplicates"] >= 1 and report["left"] == 0 and report["quarantined"] == [], report
    assert lab.spool().pending() == 0
    keys = [r.sort_key for r in res.records]
    assert len(keys) == len(set(keys)) == 6  # every probe once
    assert {r.status for r in res.records} == {ProbeStatus.COMPLETED}
    # Every planned probe accounted for - stored, or spooled with the store's failure as its cause.
    outcomes = res.account.outcomes
    assert len(outcomes) == 6 and {o.recorded for o in outcomes.values()} <= {"stored", "spooled", "duplicate"}, res.account.to_json()
    assert res.account.lost == [] and res.account.count("spooled") == report["replayed"] + report["duplicates"], res.account.to_json()
    # no in-flight marker left: each record's transaction deleted its own, the first record's too (the
    # store was killed right after it; a DeleteItem after the write would have failed and left it)
    assert in_flight_probes(store, route, time.time()) == []
    assert lab.leftovers() == {"source": [], "destination": []}


def test_a_lost_putitem_answer_makes_one_record(lab: Lab) -> None:
    """A loopback proxy lets DynamoDB Local write the first record, then drops its answer."""
    with LosingProxy(lab.servers["dynamodb"].port, lambda req: b"DynamoDB_20120810.PutItem" in req) as proxy:
        deps = lab.deps()
        deps.store = DynamoLatencyStore(TABLE, clients.dynamodb(endpoint_url=proxy.url, keys=("lab", "lab")))
        res = run_request(payload(lab, "lost-answer", "1MiB", trials=2), deps)
    assert proxy.lost == 1
    assert [r.status for r in res.records] == [ProbeStatus.COMPLETED] * 2
    recorded = [i.result["recorded"] for i in res.execution.invocations if i.function == "RecordResult" and i.result]
    assert recorded == ["stored", "stored"]  # the retry saw its own write: stored once, metrics once
    assert lab.leftovers() == {"source": [], "destination": []}


def test_cleanup_aborts_a_multipart_upload_the_uploader_left(lab: Lab) -> None:
    """An uploader that dies mid-upload (its abort fails too) leaves an upload; Cleanup aborts it."""
    from replmon.adapters.s3 import S3ObjectStore

    deps = lab.deps()
    real = deps.stores

    class DyingUploader:
        def __init__(self, inner: S3ObjectStore) -> None:
            self.inner, self.parts = inner, 0

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def upload_part(self, *args: Any) -> str:
            self.parts += 1
            if self.parts == 2:
                raise ConnectionResetError("the uploader's connection died")
            return self.inner.upload_part(*args)

        def abort_multipart(self, *args: Any) -> None:
            raise ConnectionResetError("the uploader died before aborting")

    dying: dict[str, DyingUploader] = {}

    def stores(ep: Any) -> Any:
        store = real(ep)
        if ep.bucket == "probe-source" and ep.endpoint_url == lab.servers["source"].url:
            return dying.setdefault("source", DyingUploader(store))
        return store

    deps.stores = stores
    res = run_request(payload(lab, "orphan", "24MiB"), deps)
    [rec] = res.records
    assert rec.status is ProbeStatus.ERROR and "ConnectionResetError" in (rec.failure_reason or "")
    cleanup = next(i.result for i in res.execution.invocations if i.function == "Cleanup" and i.result)
    assert cleanup["cleaned"].get("source:uploads") == 1
    assert lab.leftovers() == {"source": [], "destination": []}


def test_a_black_hole_endpoint_is_reported_within_seconds(lab: Lab) -> None:
    with BlackHole() as hole:
        t0 = time.time()
        r = subprocess.run([*REPLMON, "probe", "--source-bucket", "probe-source", "--dest-bucket", "probe-replica",
                            "--source-endpoint", hole.url, "--dest-endpoint", lab.servers["destination"].url,
                            "--dynamodb-endpoint", lab.servers["dynamodb"].url], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "REPLMON_ACCESS_KEY_ID": lab.keys[0], "REPLMON_SECRET_ACCESS_KEY": lab.keys[1]}, cwd=ROOT)
        probe_seconds = time.time() - t0
        t0 = time.time()
        rep = subprocess.run([*REPLMON, "report", "--route", "x", "--dynamodb-endpoint", hole.url], capture_output=True, text=True,
                             timeout=120, cwd=ROOT)
        report_seconds = time.time() - t0
    assert r.returncode == 3 and probe_seconds < 15, (probe_seconds, r.stderr)
    [line] = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert f"source bucket 'probe-source' at {hole.url}: no answer within the timeout" in line
    assert rep.returncode == 3 and report_seconds < 20, (report_seconds, rep.stderr)
    assert "no answer within the timeout" in rep.stderr


def test_a_hung_destination_costs_bounded_time_and_the_probe_is_stuck(lab: Lab) -> None:
    """The destination hangs (SIGSTOP) after the PUT: the probe is STUCK at its timeout; Cleanup's
    calls to the hung side time out in seconds and are counted; nothing waits for minutes."""
    dest = lab.servers["destination"]
    store = lab.store()
    route = "hung"

    def hang_after_put() -> None:
        while not any(True for _ in lab.s3("source").list_object_versions(Bucket="probe-source", Prefix=PREFIX).get("Versions", [])):
            time.sleep(0.01)
        dest.pause()

    helper = threading.Thread(target=hang_after_put, daemon=True)
    helper.start()
    t0 = time.time()
    try:
        res = run_request(payload(lab, route, "256MiB", timeout=6), lab.deps(), function_deps=lab.function_deps())
    finally:
        helper.join(10)
        dest.resume()
    elapsed = time.time() - t0
    [rec] = res.records
    assert rec.status is ProbeStatus.STUCK, rec
    # Bounded by the documented worst case (timeout + record + cleanup bounds + Housekeeping), and
    # in practice ~1.5 minutes: each call to a hung side times out in 2 x 10 s. (MinIO's source
    # also blocks deletes while its target hangs, so the source side times out too: S3 would not.)
    from replmon.probe.plan import worst_case_seconds

    assert elapsed < min(worst_case_seconds(payload(lab, route, "256MiB", timeout=6)), 120), elapsed
    cleanup = next(i.result for i in res.execution.invocations if i.function == "Cleanup" and i.result)
    assert cleanup["cleanup_failed"] >= 1 and not any(k.startswith("destination:") for k in cleanup["cleaned"])
    # Once the destination answers again, the leftovers are swept (here: by hand, as the next day's sweep would).
    from replmon.core.route import Route
    from replmon.probe.housekeeping import sweep

    # MinIO's source can keep blocking deletes for a while after its target resumes (its
    # replication workers retry the hung target first), so the sweep is retried until both sides
    # answer: a sweep names a side that does not answer and sweeps the others.
    deadline = time.time() + 90
    while True:
        failures: list[str] = []
        sweep([Route.model_validate(lab.route(route))], lab.deps(), age_seconds=0, failures=failures)
        if not failures and lab.leftovers() == {"source": [], "destination": []}:
            break
        assert time.time() < deadline, failures
        time.sleep(2)
    assert store.query(route, 0, 4e9)[0].status is ProbeStatus.STUCK


def _listening_sockets(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket the given processes hold (from /proc)."""
    inodes: set[str] = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            addr_hex, port_hex = local.split(":")
            raw = bytes.fromhex(addr_hex)
            if v6:
                words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
                import ipaddress

                addr = ipaddress.IPv6Address(b"".join(words))
                text = str(addr.ipv4_mapped) if addr.ipv4_mapped else str(addr)
            else:
                text = ".".join(str(b) for b in raw[::-1])
            out.append((text, int(port_hex, 16)))
    return out


def _process_tree(pid: int) -> set[int]:
    out, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        for child in Path(f"/proc/{p}/task").glob("*/children"):
            for c in child.read_text().split():
                if int(c) not in out:
                    out.add(int(c))
                    todo.append(int(c))
    return out


def test_every_lab_server_listens_on_loopback_only(lab: Lab) -> None:
    pids = set().union(*(_process_tree(s.proc.pid) for s in lab.servers.values() if s.proc))
    sockets = _listening_sockets(pids)
    assert {p for _, p in sockets} >= {s.port for s in lab.servers.values()}
    assert all(addr in ("127.0.0.1", "::1") for addr, _ in sockets), sockets


def test_no_secret_in_any_process_arguments(lab: Lab) -> None:
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        assert lab.root_password not in text, cmdline
        assert all(secret not in text for _, secret in lab.users.values()), cmdline


def test_the_lab_directory_and_its_secrets_are_the_owners_alone(lab: Lab) -> None:
    """The lab dir holds MinIO's root password (the servers' data): 0700, and
    no file in it readable or writable by group or others."""
    root = Path(lab.root)
    assert os.stat(root).st_mode & 0o777 == 0o700
    assert os.stat(root / ".lock").st_mode & 0o777 == 0o600
    holding = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size < 2**20
               and lab.root_password.encode() in p.read_bytes()]
    assert [(str(p), oct(p.stat().st_mode & 0o777)) for p in holding if p.stat().st_mode & 0o077] == []


def test_no_lab_server_inherits_the_shells_secrets(lab: Lab) -> None:
    """A server's environment is the few harmless variables and its own settings
    (servers.INHERITED): no AWS_* or REPLMON_* of the shell that started the lab; its TMPDIR is
    inside the lab directory."""
    from replmon.lab.servers import INHERITED

    for name, server in lab.servers.items():
        assert server.proc is not None, name
        env = dict(line.split("=", 1) for line in Path(f"/proc/{server.proc.pid}/environ").read_bytes().decode(errors="replace")
                   .split("\0") if "=" in line)
        extra = set(env) - set(INHERITED) - set(server.env) - {"TMPDIR"}
        assert extra == set(), (name, sorted(extra))
        assert not any(k.startswith("REPLMON_") for k in env), name
        if "TMPDIR" in env:
            assert Path(env["TMPDIR"]).resolve().is_relative_to(Path(lab.root).resolve()), name


# ------------------------------------------------------------------------------------------------
# `replmon lab run` as an operator runs it: signals, two runs on one directory, a directory that is not the lab's.

def lab_processes(root: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in text and ("minio" in text or "LoopbackDynamoDB" in text):
            found.append(text[:120])
    return found


def start_lab_run(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*REPLMON, "lab", "run", "--dir", str(root), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "REPLMON_PROGRESS": "0"})


def wait_for_probe_in_flight(root: Path, timeout: float = 90) -> None:
    """Until a probe object exists on the source (its upload has begun)."""
    deadline = time.time() + timeout
    probes = root / "minio-source" / "probe-source" / PREFIX.rstrip("/")
    uploads = root / "minio-source" / ".minio.sys" / "multipart"
    while time.time() < deadline:
        if (probes.exists() and any(probes.rglob("xl.meta"))) or (uploads.exists() and any(uploads.iterdir())):
            return
        time.sleep(0.05)
    raise AssertionError("no probe started")


def probe_files_left(root: Path) -> list[str]:
    left = []
    for side, bucket in (("minio-source", "probe-source"), ("minio-destination", "probe-replica")):
        d = root / side / bucket / PREFIX.rstrip("/")
        left += [str(p) for p in d.rglob("xl.meta")] if d.exists() else []
        mp = root / side / ".minio.sys" / "multipart"
        left += [str(p) for p in mp.rglob("*") if p.is_file()] if mp.exists() else []
    return left


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_lab_run_records_cleans_and_stops_everything(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    root = tmp_path / "lab"
    run = start_lab_run(root, "--sizes", "512MiB", "--trials", "3", "--resolution", "0.5")
    wait_for_probe_in_flight(root)
    if sig is signal.SIGTERM:  # a second run on the same directory is refused at once, with one line
        second = subprocess.run([*REPLMON, "lab", "run", "--dir", str(root), "--sizes", "1MiB"], capture_output=True, text=True,
                                timeout=60, cwd=ROOT)
        assert second.returncode == 2
        assert [ln for ln in second.stderr.splitlines() if ln.strip()] == [
            f"error: --dir {root} is in use by another replmon lab (pid {run.pid}); wait for it or choose another --dir"]
    run.send_signal(sig)
    _stdout, stderr = run.communicate(timeout=150)
    assert run.returncode == code, stderr
    assert f"interrupted by {sig.name}" in stderr
    assert "recorded (stored)" in stderr and "never started" in stderr, stderr
    assert lab_processes(root) == []
    assert probe_files_left(root) == []
    # The record is there, as INTERRUPTED, and the next run on the directory starts clean.
    with Lab(root) as again:
        recs = again.store().query("lab", 0, 4e9)
        assert [r.status for r in recs] == [ProbeStatus.INTERRUPTED]
        assert sig.name in (recs[0].failure_reason or "")


def test_a_killed_lab_run_leaves_no_server(tmp_path: Path) -> None:
    root = tmp_path / "lab"
    run = start_lab_run(root, "--sizes", "512MiB", "--trials", "2")
    wait_for_probe_in_flight(root)
    assert lab_processes(root)
    run.kill()  # SIGKILL: no handler runs; the servers' parent-death signal does the work
    run.wait(30)
    deadline = time.time() + 20
    while lab_processes(root) and time.time() < deadline:
        time.sleep(0.2)
    assert lab_processes(root) == []
    r = subprocess.run([*REPLMON, "lab", "run", "--dir", str(root), "--sizes", "1MiB", "--trials", "1"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "left behind: 0" in r.stdout


def test_a_stale_server_in_the_pidfile_is_stopped_by_the_next_start(tmp_path: Path) -> None:
    from replmon.lab.servers import Pidfile, Server

    stale = Server("stale", 0, ["sleep", "300"], {}, tmp_path / "stale.log")
    stale.start()
    assert stale.proc is not None
    pidfile = Pidfile(tmp_path / "servers.json")
    pidfile.write([stale])
    # A different process with a recycled pid would not match the recorded start time: only ours is killed.
    assert pidfile.stop_stale() == [f"stale (pid {stale.proc.pid})"]
    stale.proc.wait(10)
    assert stale.proc.returncode == -signal.SIGKILL


def test_a_directory_the_lab_did_not_make_is_never_touched(tmp_path: Path) -> None:
    foreign = tmp_path / "config"
    (foreign / "mc").mkdir(parents=True)
    (foreign / "mc" / "keep.json").write_text("{}")
    r = subprocess.run([*REPLMON, "lab", "run", "--dir", str(foreign)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "is not empty and was not made by `replmon lab`" in r.stderr
    assert (foreign / "mc" / "keep.json").read_text() == "{}"
    file = tmp_path / "a-file"
    file.write_text("x")
    r = subprocess.run([*REPLMON, "lab", "run", "--dir", str(file)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and f"--dir {file} is a file" in r.stderr


def test_a_corrupt_dynamodb_local_file_is_one_line_and_exit_3(tmp_path: Path) -> None:
    """The issue's traceback (exit 1, read as a breach): DynamoDB Local's database damaged past its
    header (a file that is not SQLite at all is named before any server starts: tests/test_cli_hostile.py)."""
    from replmon.lab.servers import SQLITE_HEADER
    from tests.test_hostile_inputs import one_error_line

    root = tmp_path / "lab"
    (root / "dynamodb").mkdir(parents=True)
    (root / ".replmon-lab").write_text("{}")
    (root / "dynamodb" / "shared-local-instance.db").write_bytes(SQLITE_HEADER + os.urandom(20_000))
    r = subprocess.run([*REPLMON, "lab", "run", "--dir", str(root), "--sizes", "1MiB", "--format", "json"], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "REPLMON_PROGRESS": "0"})
    line = one_error_line(r.stderr)
    assert r.returncode == 3 and f"DynamoDB Local cannot use its data in {root / 'dynamodb'}" in line and r.stdout == ""


@pytest.mark.parametrize("kind", ["new", "empty"])
def test_lab_up_works_on_a_new_or_empty_directory(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "lab"
    if kind == "empty":
        root.mkdir()
    up = subprocess.run([*REPLMON, "lab", "up", "--dir", str(root), "--format", "json"], capture_output=True, text=True, timeout=300)
    try:
        assert up.returncode == 0, up.stderr
        assert json.loads(up.stdout)["dir"] == str(root)  # one JSON document on stdout
    finally:
        down = subprocess.run([*REPLMON, "lab", "down", "--dir", str(root)], capture_output=True, text=True, timeout=120)
    assert down.returncode == 0 and "stopped supervisor" in down.stderr
