"""A region pair on loopback: source MinIO -> (bandwidth-limited replication) -> destination MinIO,
plus DynamoDB Local for the latency store. ``with Lab(root) as lab:`` starts everything and
always stops it."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.metrics import NullMetrics
from replmon.adapters.s3 import S3Stores
from replmon.clock import WallClock
from replmon.lab import servers
from replmon.lab.servers import PASSWORD, USER, Server
from replmon.local.tables import ensure_table
from replmon.local.template import TEMPLATE
from replmon.service import Deps
from replmon.upload import UploadSettings

SOURCE_BUCKET, DEST_BUCKET, TABLE = "probe-source", "probe-replica", "replmon-latency"
PREFIX = "replmon-probes/"
KEYS = (USER, PASSWORD)


def lab_route(name: str, source_url: str, destination_url: str) -> dict[str, Any]:
    """The probe route through the lab's two servers."""
    return {
        "name": name,
        "source": {"bucket": SOURCE_BUCKET, "endpoint_url": source_url},
        "destinations": [{"bucket": DEST_BUCKET, "endpoint_url": destination_url}],
        "prefix": PREFIX,
    }


@dataclass
class Lab:
    root: Path = Path("lab-data")
    bandwidth: str = "100MiB"  # MinIO's minimum replication bandwidth limit
    fresh_buckets: bool = True
    servers: dict[str, Server] = field(default_factory=dict)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Lab:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        logs = self.root / "logs"
        if self.fresh_buckets:  # object data is per run; the latency history (DynamoDB) is kept
            for d in ("minio-source", "minio-destination", "mc"):
                shutil.rmtree(self.root / d, ignore_errors=True)
        self.servers["source"] = servers.minio("minio-source", self.root / "minio-source", logs)
        self.servers["destination"] = servers.minio("minio-destination", self.root / "minio-destination", logs)
        self.servers["dynamodb"] = servers.dynamodb_local(self.root / "dynamodb", logs)
        # Start all three at once: the JVM and MinIO boot in parallel.
        for s in self.servers.values():
            s.start()
        for s in self.servers.values():
            s.wait_ready()
        self.configure_replication()
        ensure_table(self.dynamodb_client(), TABLE, TEMPLATE)

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()

    def restart(self, name: str) -> None:
        """Start a stopped server again on the same port and data directory."""
        self.servers[name].start()
        self.servers[name].wait_ready()

    # ------------------------------------------------------------------ setup
    def configure_replication(self) -> None:
        cfg = self.root / "mc"
        src, dst = self.servers["source"], self.servers["destination"]
        servers.mc(cfg, "alias", "set", "src", src.url, USER, PASSWORD)
        servers.mc(cfg, "alias", "set", "dst", dst.url, USER, PASSWORD)
        servers.mc(cfg, "mb", "--ignore-existing", f"src/{SOURCE_BUCKET}")
        servers.mc(cfg, "mb", "--ignore-existing", f"dst/{DEST_BUCKET}")
        servers.mc(cfg, "version", "enable", f"src/{SOURCE_BUCKET}")
        servers.mc(cfg, "version", "enable", f"dst/{DEST_BUCKET}")
        try:
            rules = servers.mc(cfg, "replicate", "ls", f"src/{SOURCE_BUCKET}")
        except servers.LabError:
            rules = ""  # "replication configuration not set"
        if "replmon-probes" not in rules:
            host = dst.url.removeprefix("http://")
            servers.mc(
                cfg, "replicate", "add", f"src/{SOURCE_BUCKET}/{PREFIX}",  # rule filtered on the probe prefix
                "--remote-bucket", f"http://{USER}:{PASSWORD}@{host}/{DEST_BUCKET}",
                "--priority", "1", "--id", "replmon-probes", "--bandwidth", self.bandwidth,
                "--replicate", "existing-objects",
            )

    # ------------------------------------------------------------------ what the probes use
    def route(self, name: str = "lab") -> dict[str, Any]:
        return lab_route(name, self.servers["source"].url, self.servers["destination"].url)

    def s3(self, which: str) -> Any:
        return boto3.session.Session(aws_access_key_id=USER, aws_secret_access_key=PASSWORD).client(
            "s3", endpoint_url=self.servers[which].url, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard"}),
        )

    def dynamodb_client(self) -> Any:
        return boto3.session.Session(aws_access_key_id="lab", aws_secret_access_key="lab").client(
            "dynamodb", endpoint_url=self.servers["dynamodb"].url, region_name="us-east-1"
        )

    def store(self) -> DynamoLatencyStore:
        return DynamoLatencyStore(TABLE, self.dynamodb_client())

    def deps(self, upload: UploadSettings | None = None) -> Deps:
        return Deps(stores=S3Stores(KEYS), latency_store=self.store(), metrics=NullMetrics(), clock=WallClock(),
                    upload=upload or UploadSettings())

    def leftovers(self) -> dict[str, list[str]]:
        """Probe objects or versions still on either side (a run must leave none)."""
        out = {}
        for which, bucket in (("source", SOURCE_BUCKET), ("destination", DEST_BUCKET)):
            r = self.s3(which).list_object_versions(Bucket=bucket, Prefix=PREFIX)
            out[which] = [v["Key"] for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]
        return out


class ReplicaObserver:
    """Ground truth, independent of the probe's HEADs: lists the destination every ``period``
    seconds and notes when each replica first appears."""

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
