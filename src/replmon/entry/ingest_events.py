"""Lambda entry point of IngestEvents: S3 event notifications from SQS, with partial batch failures.

Powertools' batch processor runs ``record_handler`` per SQS message and answers Lambda with the
ids of the messages that raised (``ReportBatchItemFailures``): a malformed record fails its own
message, with one log line saying why; after the queue's maxReceiveCount it waits in the DLQ.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from replmon.lambda_entry import deps, logger, trace_aws_calls, tracer
from replmon.passive import IngestDeps, ingest, plan
from replmon.s3events import parse_sqs_message

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class RejectedRecord(ValueError):
    """A record replmon cannot read: its message is reported as a batch item failure."""


def ingest_deps(function_name: str) -> IngestDeps:
    d = deps(function_name)
    return IngestDeps(d.latency_store, d.metrics, d.routes, d.retention_days, d.event_skew)


def handle_message(record: SQSRecord, function_name: str = "") -> list[str]:
    parsed = parse_sqs_message(record.raw_event, f"message {record.message_id}")
    bad = [p for p in parsed if p.error]
    d = ingest_deps(function_name)
    if bad:
        d.metrics.count("EventsRejected", len(bad))
        reason = "; ".join(f"{p.position}: {p.error}" for p in bad)
        logger.warning("event record rejected", extra={"message_id": record.message_id, "reason": reason})
        raise RejectedRecord(reason)
    try:
        notes = ingest([plan(p, d.routes, d.prefixes) for p in parsed], d)
        logger.info("event records taken", extra={"message_id": record.message_id, "results": notes})
        return notes
    except Exception as exc:  # the store is down: the message is retried, then waits in the DLQ
        logger.warning("event record not stored; SQS will retry it",
                       extra={"message_id": record.message_id, "reason": f"{type(exc).__name__}: {exc}"})
        raise


def record_handler(record: SQSRecord, lambda_context: Any = None) -> list[str]:
    """Powertools passes ``lambda_context`` to a handler that names it."""
    return handle_message(record, getattr(lambda_context, "function_name", ""))


def _handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return dict(process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context))


# The same tracing and logging as every other handler (lambda_entry.lambda_handler).
handler = logger.inject_lambda_context(clear_state=True)(
    tracer().capture_lambda_handler(capture_response=False)(_handler) if trace_aws_calls() else _handler)
