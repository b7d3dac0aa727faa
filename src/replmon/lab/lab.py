"""A region pair on loopback: source MinIO -> (bandwidth-limited replication) -> destination MinIO,
plus DynamoDB Local for the latency store. ``with Lab(root) as lab:`` starts everything and
always stops it.

- The lab directory is the lab's: a marker file says the lab made it (a non-empty directory
  without one is refused, never emptied), and a lock lets one lab use it at a time.
- Least privilege on a real server: each Lambda function runs as its own MinIO user whose
  policy is that function's S3 statements from template.yaml (MinIO enforces AWS-style
  policies), so a statement the code needs and the template lacks fails here too.
- Credentials are random per start and reach the servers through the environment only.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import threading
import time
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from replmon import wiring
from replmon.adapters import clients
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.spool import DirectorySpool
from replmon.core.clock import WallClock
from replmon.core.files import write_atomic
from replmon.core.route import Route
from replmon.lab import servers
from replmon.lab.servers import LabError, Pidfile, Server
from replmon.local.aslrun import FUNCTIONS
from replmon.local.cfn import Resolver, function_statements
from replmon.local.tables import ensure_table
from replmon.local.template import TEMPLATE, load_template
from replmon.probe.upload import UploadSettings

SOURCE_BUCKET, DEST_BUCKET, TABLE = "probe-source", "probe-replica", "replmon-latency"
PREFIX = "replmon-probes/"
REPLICATION_PROXY = "replication"  # the Toxiproxy listener the source replicates through
REPLICATION_RULE = "replmon-probes"  # the source's replication rule ID
EVENTS_TARGET = "arn:minio:sqs::REPLMON:webhook"  # the webhook both MinIO servers notify (lab/event_path.py)
MARKER = ".replmon-lab"
ROOT_USER = "replmon-admin"


def lab_route(name: str, source_url: str, destination_url: str) -> dict[str, Any]:
    """The probe route through the lab's two servers."""
    return {
        "name": name,
        "source": {"bucket": SOURCE_BUCKET, "endpoint_url": source_url},
        "destinations": [{"bucket": DEST_BUCKET, "endpoint_url": destination_url}],
        "prefix": PREFIX,
    }


def planned_route(name: str) -> dict[str, Any]:
    """The lab's route before its servers pick their ports: loopback URLs at their longest, so a
    plan can be sized (probe.plan.check_fits) before anything starts."""
    return lab_route(name, "http://127.0.0.1:65535", "http://127.0.0.1:65535")


def function_policy(function: str) -> dict[str, Any] | None:
    """``function``'s S3 statements from template.yaml, for the lab's buckets (existing-bucket
    mode); None if it has none (it then runs as a user with no policy: every S3 call denied)."""
    t = load_template(TEMPLATE)
    r = Resolver(t, {"BucketMode": "existing", "SourceBucketName": SOURCE_BUCKET, "DestinationBucketName": DEST_BUCKET})
    statements = s3_statements(function_statements(t, function, r))
    return {"Version": "2012-10-17", "Statement": statements} if statements else None


def s3_statements(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The statements' S3 actions only (what a MinIO policy can hold); statements left with none are dropped."""
    out = []
    for st in statements:
        actions = [a for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]) if a.startswith("s3:")]
        if actions:
            out.append({**st, "Action": actions})
    return out


#: The folders the lab keeps in its directory (a file in one's place is named at the edge, never met as a traceback).
FOLDERS = ("logs", "tmp", "dynamodb", "minio-source", "minio-destination", "spool", "runs")
#: The files the lab keeps there (lab/servers.py Pidfile, lab/session.py): read back, so checked too.
STATE_FILES = (MARKER, ".lock", "servers.json", "lab-up.json", "lab.env", "lab.secret")


def check_layout(root: Path) -> None:
    """``root`` is a directory, new, empty or the lab's, and none of the lab's folders is a file."""
    if root.exists() and not root.is_dir():
        raise LabError(f"--dir {root} is a file; give a directory (new or made by an earlier `replmon lab`)")
    try:
        foreign = root.exists() and any(root.iterdir()) and not (root / MARKER).exists()
    except OSError as exc:
        raise LabError(f"--dir {root} cannot be read: {exc.strerror}") from None
    if foreign:
        raise LabError(f"--dir {root} is not empty and was not made by `replmon lab` (no {MARKER} marker); "
                       "choose a new or empty directory - the lab never deletes what it did not create")
    for name in FOLDERS:
        path = root / name
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise LabError(f"--dir {root}: {path} is a file where the lab keeps its {name} folder; move it away (the lab makes "
                           "the folder) or choose another --dir")
    for name in STATE_FILES:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            raise LabError(f"--dir {root}: {path} is a folder where the lab keeps a file; move it away or choose another --dir")


def claim_directory(root: Path) -> IO[str]:
    """Make ``root`` the lab's (or check it is), and lock it; returns the held lock file."""
    check_layout(root)
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        root.chmod(0o700)  # servers' data, logs and credentials: the owner's alone
        if not (root / MARKER).exists():
            write_atomic(root / MARKER, json.dumps({"made_by": "replmon lab", "note": "replmon may delete this directory's contents"}).encode())
        # errors="replace": the holder's pid is read back for the message, whatever the file holds
        lock = os.fdopen(os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600), "a+", encoding="utf-8", errors="replace")
    except OSError as exc:
        from replmon.core.files import describe_os_error, disk_full

        if disk_full(exc):
            raise LabError(f"lab: {describe_os_error(exc)}") from None
        raise LabError(f"--dir {root} is not writable: {exc.strerror}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise LabError(f"--dir {root} is in use by another replmon lab (pid {holder}); wait for it or choose another --dir") from None
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


@dataclass
class Lab:
    root: Path = Path("lab-data")
    bandwidth: str = "100MiB"  # MinIO's minimum replication bandwidth limit
    fresh_buckets: bool = True
    least_privilege: bool = True  # each function as a MinIO user with its role's S3 statements
    events: bool = True  # MinIO's notifications -> IngestEvents (lab/event_path.py)
    event_skew: float = 0.01  # one host, one clock: the allowance covers ms rounding and scheduling
    servers: dict[str, Server] = field(default_factory=dict)
    root_password: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    users: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)  # function -> (access key, secret)
    _lock: IO[str] | None = field(default=None, repr=False)
    event_path: Any = field(default=None, repr=False)
    _events_deps: dict[str, wiring.Deps] = field(default_factory=dict, repr=False)  # what IngestEvents runs with
    _events_routes: list[dict[str, Any]] = field(default_factory=list, repr=False)  # registered by events_to
    _injection: ExitStack = field(default_factory=ExitStack, repr=False)
    replication_proxy_port: int = 0
    toxiproxy: Any = field(default=None, repr=False)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Lab:
        self._lock = claim_directory(Path(self.root))
        try:
            self.start()
        except OSError as exc:  # a full disk, a folder it cannot write: named with its path, as one line
            self.stop()
            from replmon.core.files import describe_os_error

            raise LabError(f"lab: {describe_os_error(exc)}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pidfile(self) -> Pidfile:
        return Pidfile(Path(self.root) / "servers.json")

    def start(self) -> None:
        root = Path(self.root)
        servers.check_dynamodb_data(root / "dynamodb")  # a damaged store is named before any server starts
        logs = root / "logs"
        stale = self.pidfile.stop_stale()  # servers of a lab that was killed
        if stale:
            import sys

            print(f"lab: stopped servers left by an earlier run: {', '.join(stale)}", file=sys.stderr)
        if self.fresh_buckets:  # object data is per run; the latency history (DynamoDB) is kept
            for d in ("minio-source", "minio-destination", "mc"):  # mc: what a lab that still built mc left
                shutil.rmtree(root / d, ignore_errors=True)
        # The servers' temporary files (TMPDIR, java.io.tmpdir): what a killed lab left is removed.
        shutil.rmtree(root / "tmp", ignore_errors=True)
        (root / "tmp").mkdir(mode=0o700)
        hook: dict[str, str] = {}
        if self.events:
            from replmon.entry.ingest_events import handler
            from replmon.lab.event_path import EventPath
            from replmon.local.aslrun import LambdaContext

            self.servers["sqs"] = servers.sqs_server(logs)  # first: the event path's queues live there
            self.servers["sqs"].start()
            self.pidfile.write(list(self.servers.values()))
            self.servers["sqs"].wait_ready()
            self.event_path = EventPath(handler, LambdaContext("IngestEvents"), self.servers["sqs"].url).__enter__()
            # A webhook target named REPLMON (arn:minio:sqs::REPLMON:webhook) on both servers.
            hook = {"MINIO_NOTIFY_WEBHOOK_ENABLE_REPLMON": "on", "MINIO_NOTIFY_WEBHOOK_ENDPOINT_REPLMON": self.event_path.url}
        self.servers["source"] = servers.minio("minio-source", root / "minio-source", logs, ROOT_USER, self.root_password, hook)
        self.servers["destination"] = servers.minio("minio-destination", root / "minio-destination", logs, ROOT_USER, self.root_password, hook)
        self.servers["dynamodb"] = servers.dynamodb_local(root / "dynamodb", logs)
        self.servers["toxiproxy"] = servers.toxiproxy(logs)
        # Start the rest at once: the JVM and MinIO boot in parallel.
        for s in self.servers.values():
            if s.proc is None:
                s.start()
        self.pidfile.write(list(self.servers.values()))
        for s in self.servers.values():
            s.wait_ready()
        from replmon.lab.faults import Toxiproxy

        self.toxiproxy = Toxiproxy(self.servers["toxiproxy"].url)
        self.replication_proxy_port = self.toxiproxy.proxy(REPLICATION_PROXY, self.servers["destination"].port)
        from botocore.exceptions import BotoCoreError, ClientError
        from minio.error import MinioAdminException

        try:
            self.configure_replication()
            if self.events:
                self.configure_notifications()
            if self.least_privilege:
                self.create_function_users()
        except (ClientError, BotoCoreError, MinioAdminException) as exc:  # one line, as mc's failures were
            raise LabError(f"lab: configuring MinIO failed: {str(exc).splitlines()[0]}") from None
        try:
            ensure_table(self.dynamodb_client(), TABLE, TEMPLATE)
        except (ClientError, BotoCoreError) as exc:  # e.g. a corrupt database file: name it and the way out
            from replmon.adapters.explain import explain

            data = root / "dynamodb"
            raise LabError(f"lab: DynamoDB Local cannot use its data in {data} ({explain(exc)}; its log: {logs / 'dynamodb-local.log'}); "
                           f"if a file there is damaged, move {data} away and the lab starts an empty latency history") from None
        # the lab's route in its registry, as the stack writes its own (fleet/stack_route.py)
        self.register(Route.model_validate(self.route()))
        self.release_dead_runs_leases(["lab", "bench"])
        if self.events:  # the event path outlives runs: IngestEvents keeps the lab's wiring whatever a run injects
            self._events_deps["IngestEvents"] = self.deps()
            self._injection.enter_context(wiring.injected(self._events_deps))

    def stop(self) -> None:
        self._injection.close()
        if self.event_path is not None:
            self.event_path.__exit__(None, None, None)
            self.event_path = None
        for s in self.servers.values():
            s.stop()
        self.pidfile.clear()
        shutil.rmtree(Path(self.root) / "tmp", ignore_errors=True)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def restart(self, name: str) -> None:
        """Start a stopped server again on the same port and data directory."""
        self.servers[name].start()
        self.pidfile.write(list(self.servers.values()))
        self.servers[name].wait_ready()

    # ------------------------------------------------------------------ setup
    # Boto3 against the S3 API and MinIO's admin API (lab/minio_admin.py): no mc binary (building it took minutes).
    def configure_replication(self) -> None:
        """Both buckets versioned, and the source's rule ``replmon-probes`` exactly as
        ``mc replicate add src/probe-source/replmon-probes/ --priority 1 --id replmon-probes
        --bandwidth B --replicate existing-objects`` made it: a remote target (the destination
        through the Toxiproxy listener, so `replmon lab chaos` faults replication only) limited to
        B bytes/s, and a rule on the probe prefix replicating existing objects and replica
        modifications, neither delete markers nor versioned deletes (MinIO's default for an
        absent DeleteReplication is Disabled)."""
        from replmon.core.sizes import parse_size
        from replmon.lab import minio_admin

        src, dst = self.s3("source"), self.s3("destination")
        for client, bucket in ((src, SOURCE_BUCKET), (dst, DEST_BUCKET)):
            with suppress(client.exceptions.BucketAlreadyOwnedByYou):  # a kept lab (fresh_buckets=False)
                client.create_bucket(Bucket=bucket)
            client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        try:
            rules = src.get_bucket_replication(Bucket=SOURCE_BUCKET)["ReplicationConfiguration"]["Rules"]
        except src.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] != "ReplicationConfigurationNotFoundError":
                raise
            rules = []
        if any(r.get("ID") == REPLICATION_RULE for r in rules):
            return
        target = minio_admin.remote_target(SOURCE_BUCKET, f"127.0.0.1:{self.replication_proxy_port}", self.keys,
                                           DEST_BUCKET, parse_size(self.bandwidth))
        try:
            arn = minio_admin.set_remote_target(self.servers["source"].url, self.keys, SOURCE_BUCKET, target)
        except RuntimeError as exc:
            raise LabError(f"lab: the source's replication target: {exc}") from None
        rule = {
            "ID": REPLICATION_RULE, "Priority": 1, "Status": "Enabled",
            "Filter": {"And": {"Prefix": PREFIX}},  # mc's filter shape: And with the prefix alone
            "SourceSelectionCriteria": {"ReplicaModifications": {"Status": "Enabled"}},
            "ExistingObjectReplication": {"Status": "Enabled"},
            "DeleteMarkerReplication": {"Status": "Disabled"},
            "Destination": {"Bucket": arn},  # MinIO: the remote target's ARN
        }
        src.put_bucket_replication(Bucket=SOURCE_BUCKET, ReplicationConfiguration={"Role": "", "Rules": [*rules, rule]})

    def configure_notifications(self) -> None:
        """Replication events (and ObjectCreated) from the source; ObjectCreated from the
        destination, which MinIO does not send for replicas (lab/event_path.py)."""
        for which, bucket, events in (("source", SOURCE_BUCKET, ["s3:ObjectCreated:*", "s3:Replication:*"]),
                                      ("destination", DEST_BUCKET, ["s3:ObjectCreated:*"])):
            client = self.s3(which)
            config = client.get_bucket_notification_configuration(Bucket=bucket)
            queues = config.get("QueueConfigurations", [])
            if any(q["QueueArn"] == EVENTS_TARGET for q in queues):
                continue
            queues.append({"QueueArn": EVENTS_TARGET, "Events": events,
                           "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": PREFIX}]}}})
            config.pop("ResponseMetadata", None)
            client.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={**config, "QueueConfigurations": queues})

    def create_function_users(self) -> None:
        """One MinIO user per function on both servers, with the function's S3 statements."""
        from concurrent.futures import ThreadPoolExecutor

        from replmon.lab import minio_admin

        admins = {which: minio_admin.admin(self.servers[which].url, self.keys) for which in ("source", "destination")}

        def one(fn: str, which: str, access: str, secret: str, policy: dict[str, Any] | None) -> None:
            admins[which].user_add(access, secret)
            if policy is not None:
                admins[which].policy_add(f"replmon-{fn.lower()}", policy=policy)
                admins[which].attach_policy([f"replmon-{fn.lower()}"], user=access)

        jobs = []
        for fn in (*FUNCTIONS, "Heartbeat"):  # the Heartbeat runs outside the state machine (lab/stallbench.py)
            self.users[fn] = (f"fn-{fn.lower()}", secrets.token_urlsafe(24))
            policy = function_policy(fn)
            jobs += [(fn, which, *self.users[fn], policy) for which in ("source", "destination")]
        with ThreadPoolExecutor(max_workers=6) as pool:
            for f in [pool.submit(one, *job) for job in jobs]:
                f.result()

    # ------------------------------------------------------------------ what the probes use
    def release_dead_runs_leases(self, routes: list[str]) -> list[str]:
        """Give back run leases (fleet/lease.py) a killed run left on ``routes``: the directory is
        this lab's alone (claim_directory), so no live run holds one now; a run killed by SIGKILL
        never reached its `finally` and its lease would skip the next run until it expires."""
        import sys
        import time

        from replmon.adapters.leases import DynamoLeases

        leases = DynamoLeases(TABLE, self.dynamodb_client())
        freed = [f"{route} (held by {lease.holder})" for route, lease in leases.leases(routes).items()
                 if lease.holder and leases.release(route, lease.holder, time.time())]
        if freed:
            print(f"lab: released the leases of a run that was killed: {', '.join(freed)}", file=sys.stderr)
        return freed

    def route(self, name: str = "lab") -> dict[str, Any]:
        return lab_route(name, self.servers["source"].url, self.servers["destination"].url)

    @property
    def keys(self) -> tuple[str, str]:
        """The lab's administrator credentials (setup, observers, leftovers checks)."""
        return (ROOT_USER, self.root_password)

    def s3(self, which: str) -> Any:
        """An administrator's S3 client for one of the lab's servers (setup, observers, leftovers)."""
        return clients.client("s3", clients.RESULTS, endpoint_url=self.servers[which].url, keys=self.keys)

    def dynamodb_client(self) -> Any:
        return clients.dynamodb(clients.STORE, endpoint_url=self.servers["dynamodb"].url, keys=("lab", "lab"))

    def store(self) -> DynamoLatencyStore:
        return DynamoLatencyStore(TABLE, self.dynamodb_client())

    def spool(self) -> DirectorySpool:
        return DirectorySpool(Path(self.root) / "spool")

    def deps(self, upload: UploadSettings | None = None, keys: tuple[str, str] | None = None) -> wiring.Deps:
        return wiring.local_deps(keys=keys or self.keys, table=TABLE, dynamodb_endpoint=self.servers["dynamodb"].url, table_keys=("lab", "lab"),
                                 spool_dir=Path(self.root) / "spool", clock=WallClock(), upload=upload or UploadSettings(),
                                 event_skew=self.event_skew)

    def register(self, route: Route) -> None:
        """Put ``route`` in the lab's registry (the one list every function reads), as the stack writes its own."""
        from replmon.fleet.stack_route import spec_of_route, upsert_stack_route

        registry = wiring.local_registry(self.store())
        upsert_stack_route(registry, spec_of_route(route, groups=1))
        self.forget_cached_routes()

    @staticmethod
    def forget_cached_routes() -> None:
        """IngestEvents reuses the registry's routes for a minute (entry/ingest_events.py); a lab test
        registers a route and sends its events at once, so the lab's in-process function re-reads."""
        from replmon.entry import ingest_events

        ingest_events._routes.clear()

    def events_to(self, routes: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """IngestEvents maps events onto these routes too from now on (a chaos run's own route: put
        in the registry; None: the ones an earlier call put there are removed); returns the routes
        registered before, to restore them."""
        from replmon.fleet.stack_route import delete_stack_route

        before = list(self._events_routes)
        for r in before:
            if r["name"] != "lab" and r["name"] not in {x["name"] for x in routes or []}:
                delete_stack_route(wiring.local_registry(self.store()), r["name"])
        for r in routes or []:
            self.register(Route.model_validate(r))
        self._events_routes = list(routes or [])
        if "IngestEvents" in self._events_deps:  # a new registry reader: IngestEvents' cached routes are not reused
            self._events_deps["IngestEvents"] = self.deps()
        return before

    def function_deps(self, upload: UploadSettings | None = None) -> dict[str, wiring.Deps]:
        """Deps per state machine function: each function's own MinIO user (least privilege)."""
        if not self.least_privilege:
            return dict.fromkeys(FUNCTIONS, self.deps(upload))
        built = {fn: self.deps(upload, self.users[fn]) for fn in FUNCTIONS}
        # Each function's S3 clients are made now, as a warm Lambda container has them: making
        # them inside the first PollReplication call would delay its first HEAD by ~0.5 s.
        route = Route.model_validate(self.route())
        for d in built.values():
            for endpoint in (route.source, *route.destinations):
                d.stores(endpoint)
        return built

    def leftovers(self) -> dict[str, list[str]]:
        """Probe objects or versions (and incomplete uploads) still on either side (a run must leave none)."""
        out = {}
        for which, bucket in (("source", SOURCE_BUCKET), ("destination", DEST_BUCKET)):
            s3 = self.s3(which)
            r = s3.list_object_versions(Bucket=bucket, Prefix=PREFIX)
            keys = [v["Key"] for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
            keys += [f"upload:{u['Key']}" for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=PREFIX).get("Uploads", [])]
            out[which] = keys
        return out


class ReplicaObserver:
    """Ground truth, independent of the probe's HEADs: lists the destination every ``period``
    seconds and notes when each replica first appears in a listing."""

    def __init__(self, lab: Lab, prefix: str, period: float = 0.01) -> None:
        self.s3 = lab.s3("destination")
        self.prefix, self.period = prefix, period
        # key -> (last listing sent without it, first listing answered with it): the replica
        # became visible inside that window.
        self.seen: dict[str, tuple[float, float]] = {}
        self.already_there: set[str] = set()  # present at the first listing: no window is known
        self._absent_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.time()
            try:
                r = self.s3.list_objects_v2(Bucket=DEST_BUCKET, Prefix=self.prefix)
            except Exception:  # destination down (a test stops it): keep watching
                time.sleep(self.period)
                continue
            received = time.time()
            for obj in r.get("Contents", []):
                key = obj["Key"]
                if self._absent_since is None:
                    self.already_there.add(key)
                elif key not in self.seen and key not in self.already_there:
                    self.seen[key] = (self._absent_since, received)
            self._absent_since = sent  # every key not yet seen was absent at this moment
            time.sleep(self.period)

    def __enter__(self) -> ReplicaObserver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
