"""The lab's event path: MinIO's bucket notifications -> an SQS queue -> IngestEvents' handler.

MinIO posts each notification to a webhook (``MINIO_NOTIFY_WEBHOOK_*``); this receiver, on
loopback, sends each body to a queue of the lab's SQS server (moto's server, from PyPI) whose
redrive policy moves a message to a dead-letter queue after ``max_receives`` receives. A poller
does what Lambda's SQS event source mapping does: ReceiveMessage (up to 10), the real ingest
handler (Powertools' batch processor) on the Lambda-shaped batch, DeleteMessage for every
message not named in ``batchItemFailures``; a failed message comes back after the visibility
timeout.

MinIO does not notify a replica's creation on the destination (its event code skips replica
writes), so the lab's stand-in for a replica's ObjectCreated is the source's
``s3:Replication:OperationCompletedReplication`` (a MinIO extension), whose time is when the
source finished replicating (docs/SEMANTICS.md, "Replica events").
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from replmon.adapters import clients
from replmon.lab.servers import LOOPBACK

QUEUE, DLQ = "lab-events", "lab-events-dlq"


class EventPath:
    """Webhook receiver -> SQS queue (with DLQ) -> poller -> ``handler(event, context)``."""

    def __init__(self, handler: Any, context: Any, sqs_url: str, max_receives: int = 3, visibility: int = 1) -> None:
        self.handler, self.context = handler, context
        self.max_receives = max_receives
        self.sqs: Any = clients.client("sqs", clients.STORE, endpoint_url=sqs_url, keys=("lab", "lab"))
        dlq = self.sqs.create_queue(QueueName=DLQ)["QueueUrl"]
        dlq_arn = self.sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.dlq_url = dlq
        self.queue_url = self.sqs.create_queue(QueueName=QUEUE, Attributes={
            "VisibilityTimeout": str(visibility),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receives)})})["QueueUrl"]
        self.queue_arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self._busy = False
        self._stop = threading.Event()
        outer = self

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                try:
                    outer.sqs.send_message(QueueUrl=outer.queue_url, MessageBody=body)
                    self.send_response(200)
                except Exception:  # the queue is down: MinIO keeps the event and retries
                    self.send_response(503)
                self.end_headers()

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
        self._poller = threading.Thread(target=self._poll, name="replmon-lab-events", daemon=True)
        self._poller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop receiving, then wait for the poller's batch in hand (before the servers stop: a
        poller still calling a stopped SQS server printed a traceback at teardown)."""
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        if getattr(self, "_poller", None) is not None:
            self._poller.join(20)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self._poll_once()
            except Exception:  # the SQS server or the store is down: try again, quietly (the DLQ counts failures)
                time.sleep(0.5)

    def _poll_once(self) -> None:
        try:
            msgs = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                            AttributeNames=["All"]).get("Messages", [])
        except Exception:
            time.sleep(0.5)
            return
        if not msgs:
            self._busy = False
            time.sleep(0.05)
            return
        self._busy = True
        event = {"Records": [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                              "attributes": m.get("Attributes", {}), "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                              "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn, "awsRegion": "us-east-1"} for m in msgs]}
        try:
            out = self.handler(event, self.context)
            failed = {f["itemIdentifier"] for f in (out or {}).get("batchItemFailures", [])}
        except Exception:  # the whole batch failed: every message comes back
            failed = {m["MessageId"] for m in msgs}
        done = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs) if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=done)

    def depth(self, url: str | None = None) -> int:
        a = self.sqs.get_queue_attributes(QueueUrl=url or self.queue_url,
                                          AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
        return int(a["Attributes"]["ApproximateNumberOfMessages"]) + int(a["Attributes"]["ApproximateNumberOfMessagesNotVisible"])

    @property
    def dead(self) -> list[dict[str, Any]]:
        """The dead-letter queue's messages (read without consuming: visibility 0)."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        for _ in range(10):
            got = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=0,
                                           AttributeNames=["All"]).get("Messages", [])
            new = [m for m in got if m["MessageId"] not in seen]
            if not new:
                break
            seen |= {m["MessageId"] for m in new}
            out += new
        return out

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until the queue is empty and the poller idle (True) or ``timeout`` passes (False)."""
        end = time.time() + timeout
        while time.time() < end:
            if self.depth() == 0 and not self._busy:
                return True
            time.sleep(0.1)
        return False
