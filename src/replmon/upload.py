"""UploadProbe: put a probe object of random bytes, as fast and as cheaply as its size allows.

- up to ``multipart_threshold``: one PutObject;
- up to ``compose_threshold``: multipart upload of fresh random parts;
- above: server-side composition. Part 1 is fresh random bytes (so every probe is unique);
  the rest are UploadPartCopy ranges of a random *seed* object kept per route under its
  ``seed_prefix`` (outside the replicated probe prefix). An 80 GiB probe then moves 8 MiB
  through the Lambda instead of 80 GiB.

Any failure aborts the multipart upload, so no invisible parts are left to bill.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from replmon.clock import Clock
from replmon.ports import ObjectStore
from replmon.state import ProbeState, Upload

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
    return f"{state.route.prefix}{state.run_id}/{state.probe_id}"


def seed_key(state: ProbeState, seed_size: int) -> str:
    return f"{state.route.seed_prefix}seed-{seed_size}"


def ensure_seed(store: ObjectStore, bucket: str, key: str, size: int, random_bytes: Callable[[int], bytes]) -> None:
    """The seed is made once per route and size; a lifecycle rule or a person may delete it."""
    found = store.head(bucket, key)
    if found is None or found.size != size:
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

    if plan.method == "put":
        body = random_bytes(state.size_bytes)  # made before the clock starts: PUT time is network time
        start = clock.now()
        result = store.put(bucket, key, body, meta)
        end = clock.now()
    else:
        seed = seed_key(state, plan.seed_size) if plan.method == "compose" else ""
        if seed:
            ensure_seed(store, bucket, seed, plan.seed_size, random_bytes)
        start = clock.now()
        upload_id = store.create_multipart(bucket, key, meta)
        try:

            def part(i: int) -> str:
                n = plan.part_sizes[i]
                if plan.method == "compose" and i > 0:
                    return store.upload_part_copy(bucket, key, upload_id, i + 1, seed, 0, n - 1)
                return store.upload_part(bucket, key, upload_id, i + 1, random_bytes(n))

            with ThreadPoolExecutor(max_workers=settings.workers) as pool:
                etags = list(pool.map(part, range(len(plan.part_sizes))))
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
