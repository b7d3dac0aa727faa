"""The lab's event path: MinIO's bucket notifications -> an SQS-shaped batch -> IngestEvents' handler.

MinIO posts each notification to a webhook (``MINIO_NOTIFY_WEBHOOK_*``); this receiver, on
loopback, queues each body as one SQS message and a delivery thread hands batches of up to 10 to
the real ingest handler (Powertools' batch processor) the way Lambda's SQS poller does: messages
named in ``batchItemFailures`` come back after a visibility delay, and after ``max_receives``
go to a dead-letter list. This is the lab's own delivery, not an SQS server: what it shares with
AWS is the message shape, the batch size and the partial-failure contract.

MinIO does not notify a replica's creation on the destination (its event code skips replica
writes), so the lab's stand-in for a replica's ObjectCreated is the source's
``s3:Replication:OperationCompletedReplication`` (a MinIO extension), whose time is when the
source finished replicating (docs/SEMANTICS.md, "Replica events").
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from replmon.lab.servers import LOOPBACK


@dataclass
class Message:
    body: str
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    receives: int = 0
    visible_at: float = 0.0


class EventPath:
    """Webhook receiver + queue + delivery to ``handler(event, context)``."""

    def __init__(self, handler: Any, context: Any, max_receives: int = 3, visibility: float = 1.0) -> None:
        self.handler, self.context = handler, context
        self.max_receives, self.visibility = max_receives, visibility
        self.queue: deque[Message] = deque()
        self.dead: list[Message] = []
        self.received: list[dict[str, Any]] = []  # every notification body, as MinIO sent it
        self.delivered = 0
        self._busy = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        outer = self

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                self.send_response(200)
                self.end_headers()
                try:
                    outer.received.append(json.loads(body))
                except json.JSONDecodeError:
                    outer.received.append({"unparsed": body})
                with outer._lock:
                    outer.queue.append(Message(body))

            def do_GET(self) -> None:  # MinIO checks the target is alive
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer((LOOPBACK, 0), Hook)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server.server_address[1]}/"

    def __enter__(self) -> EventPath:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=self._deliver, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def _deliver(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            with self._lock:
                batch = [m for m in list(self.queue) if m.visible_at <= now][:10]
                for m in batch:
                    self.queue.remove(m)
                self._busy = bool(batch)
            if not batch:
                time.sleep(0.02)
                continue
            for m in batch:
                m.receives += 1
            event = {"Records": [{"messageId": m.id, "receiptHandle": m.id, "body": m.body, "eventSource": "aws:sqs",
                                  "attributes": {"ApproximateReceiveCount": str(m.receives)}, "messageAttributes": {},
                                  "md5OfBody": "", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:lab-events",
                                  "awsRegion": "us-east-1"} for m in batch]}
            try:
                out = self.handler(event, self.context)
                failed = {f["itemIdentifier"] for f in (out or {}).get("batchItemFailures", [])}
            except Exception:  # the whole batch failed: every message comes back
                failed = {m.id for m in batch}
            with self._lock:
                for m in batch:
                    if m.id not in failed:
                        self.delivered += 1
                    elif m.receives >= self.max_receives:
                        self.dead.append(m)
                    else:
                        m.visible_at = time.time() + self.visibility
                        self.queue.append(m)
                self._busy = False

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued (True) or ``timeout`` passes (False)."""
        end = time.time() + timeout
        while time.time() < end:
            with self._lock:
                if not self.queue and not self._busy:
                    return True
            time.sleep(0.05)
        return False
