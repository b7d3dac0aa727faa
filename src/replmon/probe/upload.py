"""UploadProbe: put a probe object of random bytes, as fast and as cheaply as its size allows.

- up to ``multipart_threshold``: one PutObject;
- up to ``compose_threshold``: multipart upload of fresh random parts;
- above: server-side composition. Part 1 is fresh random bytes (so every probe is unique);
  the rest are UploadPartCopy ranges of a random *seed* object kept per route under its
  ``seed_prefix`` (outside the replicated probe prefix). An 80 GiB probe then moves 8 MiB
  through the Lambda instead of 80 GiB.

Any failure aborts the multipart upload, so no invisible parts are left to bill. An upload
that outlives the probe's deadline (``timeout_seconds`` after it began) is aborted too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from replmon.core.clock import Clock
from replmon.core.keys import parse_probe_object_key, probe_object_key, run_time
from replmon.core.ports import ObjectStore
from replmon.probe.state import ProbeState, Upload

MiB = 1024**2
MAX_PARTS = 10_000
MIN_PART = 5 * MiB  # S3's minimum for all parts but the last


@dataclass(frozen=True)
class UploadSettings:
    multipart_threshold: int = 16 * MiB
    compose_threshold: int = 256 * MiB
    part_size: int = 8 * MiB  # parts uploaded from the client
    seed_part_size: int = 64 * MiB  # parts copied server-side from the seed
    workers: int = 8


@dataclass(frozen=True)
class UploadPlan:
    """How a probe of ``size`` bytes is made.

    >>> p = plan_upload(100 * MiB, UploadSettings(compose_threshold=64 * MiB))
    >>> p.method, p.part_sizes[:2], len(p.part_sizes), p.seed_size
    ('compose', [8388608, 67108864], 3, 67108864)
    """

    method: str
    part_sizes: list[int]  # compose: part 1 is random, the rest come from the seed
    seed_size: int = 0


def _split(total: int, part: int, max_parts: int = MAX_PARTS) -> list[int]:
    part = max(part, -(-total // max_parts))
    return [min(part, total - off) for off in range(0, total, part)]


def plan_upload(size: int, settings: UploadSettings = UploadSettings()) -> UploadPlan:
    if size <= settings.multipart_threshold:
        return UploadPlan("put", [size])
    if size <= settings.compose_threshold:
        return UploadPlan("multipart", _split(size, settings.part_size))
    head = settings.part_size
    rest = _split(size - head, settings.seed_part_size, MAX_PARTS - 1)
    return UploadPlan("compose", [head, *rest], seed_size=max(rest))


def probe_key(state: ProbeState) -> str:
    """Derived from the plan, so Cleanup finds the object even when UploadProbe failed midway."""
    return probe_object_key(state.route.prefix, state.run_id, state.route.name, state.probe_id)


def run_started(key: str, prefix: str) -> float | None:
    """Epoch seconds a probe key's run was planned, read from its run id; None if not a probe key.

    >>> run_started("replmon-probes/20261122T004901Z-10a2cb/primary/20261122T004901Z-10a2cb-primary-1MiB-t1", "replmon-probes/")
    1795308541.0
    """
    parsed = parse_probe_object_key(key, prefix)
    return None if parsed is None else run_time(parsed.run_id)


class UploadDeadline(TimeoutError):
    """The upload did not finish before the probe's deadline; it was aborted."""


def seed_key(state: ProbeState, seed_size: int) -> str:
    return f"{state.route.seed_prefix}seed-{seed_size}"


def ensure_seed(store: ObjectStore, bucket: str, key: str, size: int, random_bytes: Callable[[int], bytes]) -> None:
    """The seed is made once per route and size; a lifecycle rule or a person may delete it.

    Its presence is read from a listing of its own key (the role may list the seed prefix), not
    from a HEAD: without bucket-wide s3:ListBucket, S3 answers HEAD of a missing key with 403.
    """
    if store.object_size(bucket, key) != size:
        store.put(bucket, key, random_bytes(size), {"replmon-seed": "true"})


def upload_probe(
    state: ProbeState,
    store: ObjectStore,
    clock: Clock,
    settings: UploadSettings = UploadSettings(),
    random_bytes: Callable[[int], bytes] = os.urandom,
) -> ProbeState:
    bucket = state.route.source.bucket
    key = probe_key(state)
    meta = {"replmon-probe-id": state.probe_id, "replmon-run-id": state.run_id, "replmon-route": state.route.name}
    plan = plan_upload(state.size_bytes, settings)
    if state.started_at is None:
        state.started_at = clock.now()
    deadline = state.started_at + state.timeout_seconds

    def check_deadline() -> None:
        clock.check()  # an interrupted local run stops between parts
        if clock.now() > deadline:
            raise UploadDeadline(f"UploadDeadline: upload still running {state.timeout_seconds} s after the probe began; aborted")

    if plan.method == "put":
        check_deadline()
        body = random_bytes(state.size_bytes)  # made before the clock starts: PUT time is network time
        start = clock.now()
        result = store.put(bucket, key, body, meta)
        end = clock.now()
    else:
        seed = seed_key(state, plan.seed_size) if plan.method == "compose" else ""
        if seed:
            ensure_seed(store, bucket, seed, plan.seed_size, random_bytes)
        start = clock.now()
        upload_id = store.create_multipart(bucket, key, meta, checksum=plan.method != "compose")
        try:

            def part(i: int) -> str:
                check_deadline()
                n = plan.part_sizes[i]
                if plan.method == "compose" and i > 0:
                    return store.upload_part_copy(bucket, key, upload_id, i + 1, seed, 0, n - 1)
                return store.upload_part(bucket, key, upload_id, i + 1, random_bytes(n))

            with ThreadPoolExecutor(max_workers=settings.workers) as pool:
                etags = list(pool.map(part, range(len(plan.part_sizes))))
            check_deadline()
            result = store.complete_multipart(bucket, key, upload_id, etags)
        except BaseException:
            store.abort_multipart(bucket, key, upload_id)
            raise
        end = clock.now()

    state.upload = Upload(
        key=key,
        version_id=result.version_id,
        etag=result.etag,
        checksum=result.checksum,
        method=plan.method,
        parts=len(plan.part_sizes),
        put_start=start,
        put_end=end,
    )
    return state
