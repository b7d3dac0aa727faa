"""Where a record goes when the latency store cannot take it, until a later run replays it.

- :class:`SqsSpool` in AWS: an encrypted queue (14 days' retention) per stack.
- :class:`DirectorySpool` for local runs: one JSON file per record, mode 0600.

Replay writes with the same conditional put as RecordResult and the same key, so a record that
reached both the store and the spool is still stored once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from replmon.core.files import write_atomic
from replmon.core.names import contained
from replmon.core.record import ProbeRecord


def _encode(record: ProbeRecord) -> str:
    return json.dumps({**record.to_item(), "retention_days": record.retention_days}, default=str)


def _decode(body: str) -> ProbeRecord:
    item = json.loads(body)
    rec = ProbeRecord.from_item(item)
    rec.retention_days = int(item.get("retention_days", rec.retention_days))
    return rec


class SqsSpool:
    """The stack's spool queue; ``client`` is an SQS client from adapters/clients.py."""

    def __init__(self, queue_url: str, client: Any) -> None:
        self.client, self.queue_url = client, queue_url

    def spool(self, record: ProbeRecord) -> None:
        self.client.send_message(QueueUrl=self.queue_url, MessageBody=_encode(record))

    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        taken = 0
        while taken < limit:
            r = self.client.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=min(10, limit - taken),
                                            WaitTimeSeconds=0, VisibilityTimeout=120)
            messages = r.get("Messages", [])
            if not messages:
                return
            for m in messages:
                taken += 1
                yield m["ReceiptHandle"], _decode(m["Body"])

    def ack(self, handle: str) -> None:
        self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=handle)


class DirectorySpool:
    """``<dir>/<route>/<record key>.json``, mode 0600 in 0700 folders; written atomically (a
    temporary file in the same folder, fsynced, then renamed: a full disk leaves no partial or
    empty record, and the temporary file is removed). A route name that would leave the spool
    (checked at the edge already) is refused here too (:class:`PathEscape`)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.set_aside: list[str] = []  # files in the spool that were not records (renamed *.unreadable)

    def _path(self, record: ProbeRecord) -> Path:
        name = re.sub(r"[^A-Za-z0-9._-]", "_", record.sort_key)
        return contained(self.root, record.route, f"{name}.json")

    def spool(self, record: ProbeRecord) -> None:
        path = self._path(record)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.parent.mkdir(exist_ok=True, mode=0o700)
        write_atomic(path, _encode(record).encode())

    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*/*.json"))[:limit]:
            try:
                record = _decode(path.read_text())
            except (ValueError, KeyError, TypeError) as exc:  # not a record: set aside for a person, never replayed
                path.replace(path.with_name(path.name + ".unreadable"))
                self.set_aside.append(f"{path.name}: {type(exc).__name__}")
                continue
            yield str(path), record

    def ack(self, handle: str) -> None:
        Path(handle).unlink(missing_ok=True)

    def pending(self) -> int:
        return len(list(self.root.glob("*/*.json"))) if self.root.is_dir() else 0
