"""Lambda entry point of IngestEvents: S3 event notifications from SQS, with partial batch failures.

Powertools' batch processor runs ``record_handler`` per SQS message and answers Lambda with the
ids of the messages that raised (``ReportBatchItemFailures``): a malformed record fails its own
message, with one log line saying why; after the queue's maxReceiveCount it waits in the DLQ.
"""

from __future__ import annotations

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from replmon import wiring
from replmon.entry.runtime import logger, sqs_batch_handler
from replmon.signals.event_ingest import IngestDeps, ingest, plan_ingest
from replmon.signals.s3events import parse_sqs_message


class RejectedRecord(ValueError):
    """A record missing a field storing needs (signals/s3events.py): its message is reported as a
    batch item failure."""


def ingest_deps(function_name: str) -> IngestDeps:
    d = wiring.for_function(function_name)
    return IngestDeps(d.store, d.metrics, d.routes, d.retention_days, d.event_skew)


def handle_message(record: SQSRecord, function_name: str = "") -> list[str]:
    parsed = parse_sqs_message(record.raw_event, f"message {record.message_id}")
    bad = [p for p in parsed if p.error]
    d = ingest_deps(function_name)
    if bad:
        d.metrics.count("EventsRejected", len(bad))
        reason = "; ".join(f"{p.position}: {p.error}" for p in bad)
        logger.warning("event record rejected", extra={"message_id": record.message_id, "reason": reason})
        raise RejectedRecord(reason)
    flagged = [p for p in parsed if p.signal is not None and p.signal.flags]
    if flagged:  # stored all the same; the fields that did not read are kept as sent and named here
        d.metrics.count("EventsFlagged", len(flagged))
        logger.warning("event record fields kept as sent", extra={
            "message_id": record.message_id, "flags": [f for p in flagged for f in (p.signal.flags if p.signal else ())]})
    try:
        notes = ingest([plan_ingest(p, d.routes, d.prefixes) for p in parsed], d)
        logger.info("event records taken", extra={"message_id": record.message_id, "results": notes})
        return notes
    except Exception as exc:  # the store is down: the message is retried, then waits in the DLQ
        logger.warning("event record not stored; SQS will retry it",
                       extra={"message_id": record.message_id, "reason": f"{type(exc).__name__}: {exc}"})
        raise


handler = sqs_batch_handler(handle_message)
