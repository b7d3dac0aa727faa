"""`make bench`: what the measurement costs and how exact it is, against ground truth, in the lab.

P1  HEAD requests per probe: the adaptive policy vs the published fixed 0.5 s loop (field-notes 1),
    both polling the *same* probes at the same time; plus the policy stepped on its own
    at the published CRR latencies (modelled, labelled as such).
P2  |measured latency - ground truth|; ground truth = an independent observer listing the
    destination every 10 ms for the replica.
P3  time to create a 4 GiB probe by server-side composition vs boto3 upload_file.
P4  delay from the replica's arrival to the record being in the store.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from rich.console import Console
from rich.table import Table

from replmon.clock import WallClock
from replmon.config import Route
from replmon.lab.lab import DEST_BUCKET, PREFIX, SOURCE_BUCKET, TABLE, Lab, ReplicaObserver
from replmon.local.runner import run_request
from replmon.record import ProbeRecord, ProbeStatus
from replmon.sizes import format_size, parse_size
from replmon.state import ProbeState
from replmon.upload import UploadSettings, upload_probe


@dataclass
class FixedLoop:
    """The published method: HEAD every 0.5 s from the moment the object shows up."""

    lab: Lab
    period: float = 0.5
    heads: dict[str, int] = field(default_factory=dict)
    interval: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (last PENDING sent, first COMPLETED received)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _follow(self, key: str, s3: Any) -> None:
        last_pending = 0.0
        while not self._stop.is_set():
            sent = time.time()
            try:
                st = s3.head_object(Bucket=SOURCE_BUCKET, Key=key).get("ReplicationStatus")
            except Exception:  # deleted by Cleanup before we saw it settle
                return
            self.heads[key] = self.heads.get(key, 0) + 1
            if st == "PENDING":
                last_pending = sent
            else:
                self.interval[key] = (last_pending, time.time())
                return
            time.sleep(max(0.0, self.period - (time.time() - sent)))

    def _discover(self) -> None:
        s3 = self.lab.s3("source")
        while not self._stop.is_set():
            for obj in s3.list_objects_v2(Bucket=SOURCE_BUCKET, Prefix=PREFIX).get("Contents", []):
                if obj["Key"] not in self.heads:
                    self.heads[obj["Key"]] = 0
                    threading.Thread(target=self._follow, args=(obj["Key"], self.lab.s3("source")), daemon=True).start()
            time.sleep(0.01)

    def __enter__(self) -> FixedLoop:
        threading.Thread(target=self._discover, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


class StoreWatcher:
    """Notes when each record first becomes readable in the store (for P4)."""

    def __init__(self, lab: Lab, route: str, period: float = 0.02) -> None:
        self.store, self.route, self.period = lab.store(), route, period
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._since = time.time() - 60

    def _run(self) -> None:
        while not self._stop.is_set():
            for r in self.store.query(self.route, self._since, time.time() + 60):
                self.seen.setdefault(r.probe_id, time.time())
                self._since = max(self._since, r.planned_at)  # probes run one at a time: older records are done
            time.sleep(self.period)

    def __enter__(self) -> StoreWatcher:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def modelled_heads(latency: float, floor: float = 1.0) -> tuple[int, int]:
    """(adaptive HEADs, fixed 0.5 s loop HEADs) for a given latency, stepping the policy itself
    (HEADs answer instantly: no HEAD duration is subtracted)."""
    from replmon.polling import PollPolicy

    policy, t, n = PollPolicy(floor, 0.02), 0.0, 1
    while t < latency:
        t = policy.next_head_at(t)
        n += 1
    return n, int(latency / 0.5) + 2


def _key(rec: ProbeRecord) -> str:
    return f"{PREFIX}{rec.run_id}/{rec.probe_id}"


def run_bench(out: Console, trials: int, sizes: str, compose_size: str, lab_dir: Path, output: Path | None = None) -> None:
    with Lab(lab_dir) as lab:
        out.print(f"[bold]replmon bench[/] - lab {lab.servers['source'].url} -> {lab.servers['destination'].url}, "
                  f"replication limit {lab.bandwidth}/s; sizes {sizes}, {trials} trials; policies run one after the other")
        results: dict[str, list[tuple[ProbeRecord, Any, Any, Any]]] = {}
        for label, floor in (("AWS default: 1 s, 2 %", 1.0), ("lab: 0.1 s, 2 %", 0.1)):
            with ReplicaObserver(lab, PREFIX) as truth, FixedLoop(lab) as fixed, StoreWatcher(lab, "bench") as watch:
                res = run_request({"routes": [lab.route("bench")], "sizes": sizes, "trials": trials, "max_concurrency": 1,
                                   "timeout_seconds": 600, "poll": {"floor_seconds": floor, "use_history": False}}, lab.deps(),
                                  function_deps=lab.function_deps())
                time.sleep(0.5)
            results[label] = [(r, truth.seen.get(_key(r)), fixed, watch.seen.get(r.probe_id)) for r in res.records]

        # P1 and P2 -----------------------------------------------------------------------
        t = Table(title="P1 HEADs per probe and P2 accuracy against the 10 ms destination observer (mean over trials)")
        for col in ("policy", "size", "latency s", "HEADs adaptive", "HEADs 0.5 s loop", "width adaptive s", "width 0.5 s loop s",
                    "truth window s", "|mid - truth| s", "truth in interval"):
            t.add_column(col, justify="left" if col in ("policy", "size") else "right", no_wrap=col == "policy")
        for label, rows in results.items():
            by_size: dict[int, list[tuple[ProbeRecord, Any, Any, Any]]] = {}
            for row in rows:
                by_size.setdefault(row[0].size_bytes, []).append(row)
            for size, group in sorted(by_size.items()):
                done = [g for g in group if g[0].status is ProbeStatus.COMPLETED and g[1]]
                errs, inside, fixed_heads, fixed_w, truth_w = [], 0, [], [], []
                for rec, seen, fixed, _ in done:
                    put_end = rec.put_end or 0.0
                    lo_t, hi_t = seen[0] - put_end, seen[1] - put_end  # replica became visible in this window
                    truth_mid = (lo_t + hi_t) / 2
                    truth_w.append(hi_t - lo_t)  # the observer's own resolution (10 ms period + listing time)
                    errs.append(abs((rec.latency_mid or 0) - truth_mid))
                    # Overlap of [lo, hi] with the observer's window (the replica is visible a moment
                    # before the source says COMPLETED; both windows are real).
                    inside += (rec.latency_lo or 0) <= hi_t and lo_t <= (rec.latency_hi or 0)
                    k = _key(rec)
                    if k in fixed.interval:
                        fixed_heads.append(fixed.heads[k])
                        a, b = fixed.interval[k]
                        fixed_w.append(b - max(a, put_end))
                t.add_row(label, format_size(size),
                          f"{mean(r.latency_mid or 0 for r, *_ in done):.3f}" if done else "-",
                          f"{mean(r.head_count for r, *_ in done):.1f}" if done else "-",
                          f"{mean(fixed_heads):.1f}" if fixed_heads else "-",
                          f"{mean(r.width or 0 for r, *_ in done):.3f}" if done else "-",
                          f"{mean(fixed_w):.3f}" if fixed_w else "-",
                          f"{mean(truth_w):.3f} (max {max(truth_w):.3f})" if truth_w else "-",
                          f"{mean(errs):.3f} (max {max(errs):.3f})" if errs else "-",
                          f"{inside}/{len(group)}")
        out.print(t)

        m = Table(title="P1 (modelled by stepping the policy, not measured): HEADs at the published CRR latencies (field-notes 1)")
        for col in ("latency", "HEADs adaptive (1 s, 2 %)", "HEADs 0.5 s loop", "adaptive width bound"):
            m.add_column(col, justify="right")
        for lat in (20, 60, 180, 240, 900, 1800):
            a, f = modelled_heads(lat)
            m.add_row(f"{lat} s", str(a), str(f), f"{max(1.0, 0.02 * lat):.1f} s")
        out.print(m)

        # P4 ------------------------------------------------------------------------------
        p4 = Table(title="P4 replica arrival -> record readable in the store (s)")
        for col in ("policy", "mean", "p50", "max"):
            p4.add_column(col, justify="left" if col == "policy" else "right")
        from replmon.stats import percentile

        for label, rows in results.items():
            delays = [stored - seen[1] for rec, seen, _, stored in rows if seen and stored]
            p4.add_row(label, *(f"{v:.3f}" if v is not None else "-" for v in (mean(delays) if delays else None,
                                                                                percentile(delays, 50), max(delays, default=None))))
        out.print(p4)

        # P3 ------------------------------------------------------------------------------
        size = parse_size(compose_size)
        route = Route.model_validate({  # outside the replicated prefix: P3 times creation only
            "name": "bench-p3", "prefix": "replmon-bench/",
            "source": {"bucket": SOURCE_BUCKET, "endpoint_url": lab.servers["source"].url},
            "destinations": [{"bucket": DEST_BUCKET, "endpoint_url": lab.servers["destination"].url}],
        })
        store = lab.deps().stores(route.source)
        state = ProbeState(probe_id="p3-compose", run_id="bench", planned_at=time.time(), route=route, size_bytes=size, size_class=compose_size,
                           trial=1, timeout_seconds=60, target_seconds=900)
        upload_probe(state.model_copy(update={"probe_id": "p3-seed-warmup", "size_bytes": 300 * 2**20}), store, WallClock())
        composed = upload_probe(state, store, WallClock(), UploadSettings()).upload
        assert composed is not None
        plain_file = lab_dir / "p3-upload-file.bin"
        with plain_file.open("wb") as fh:
            for _ in range(size // (64 * 2**20)):
                fh.write(os.urandom(64 * 2**20))
            fh.write(os.urandom(size % (64 * 2**20)))
        s3 = lab.s3("source")
        t0 = time.time()
        s3.upload_file(str(plain_file), SOURCE_BUCKET, "replmon-bench/bench/p3-upload-file")
        plain = time.time() - t0
        plain_file.unlink()
        for key in ("replmon-bench/bench/p3-compose", "replmon-bench/bench/p3-seed-warmup", "replmon-bench/bench/p3-upload-file"):
            store.delete_all_versions(SOURCE_BUCKET, key)
        p3 = Table(title=f"P3 creating a {compose_size} probe on the source (seed already present)")
        for col in ("method", "seconds", "bytes through the client"):
            p3.add_column(col, justify="left" if col == "method" else "right")
        p3.add_row(f"server-side composition ({composed.parts} parts)", f"{composed.put_end - composed.put_start:.2f}",
                   format_size(UploadSettings().part_size))
        p3.add_row("boto3 upload_file", f"{plain:.2f}", compose_size)
        out.print(p3)
        left = lab.leftovers()
        out.print(f"left behind: {sum(map(len, left.values()))} probe objects/versions; records in {TABLE} (DynamoDB Local, {lab_dir})")
