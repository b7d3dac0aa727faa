"""Lambda entry point of IngestFioResults: the results bucket's ``run.json`` ObjectCreated events,
through SQS, into the latency store (replmon.mounts.ingest), with partial batch failures.

A run.json is written last by the runner, so its event means the run's fio outputs are there.
A result that cannot be parsed fails its own message (one log line saying why; DLQ after the
queue's maxReceiveCount); nothing of it is stored as zero.
"""

from __future__ import annotations

import os

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from replmon import wiring
from replmon.core.ports import ObjectStore
from replmon.core.route import Endpoint
from replmon.entry.runtime import logger, sqs_batch_handler
from replmon.mounts.document import RUN_FILE
from replmon.mounts.fioresult import FioResultError
from replmon.mounts.ingest import Policy, ingest_run, load_run, rows_of
from replmon.signals.s3events import ObjectCreated, parse_sqs_message


def policy() -> Policy:
    return Policy(min_runs=int(os.environ.get("REPLMON_FIO_BASELINE_RUNS", "5")),
                  drop=float(os.environ.get("REPLMON_FIO_REGRESSION_DROP_PERCENT", "20")) / 100)


def handle_message(record: SQSRecord, function_name: str = "") -> list[str]:
    parsed = parse_sqs_message(record.raw_event, f"message {record.message_id}")
    d = wiring.for_function(function_name)
    notes = []
    try:
        for p in parsed:
            if p.error:
                raise FioResultError(f"{p.position}: {p.error}")
            if p.acknowledged or not isinstance(p.signal, ObjectCreated):
                notes.append(f"{p.position}: {p.acknowledged or 'not an ObjectCreated record'}")
                continue
            if not p.signal.key.endswith("/" + RUN_FILE):
                notes.append(f"{p.position}: {p.signal.key} is not a run.json (the notification filter should exclude it)")
                continue
            bucket, key = p.signal.bucket, p.signal.key
            base = key[: -len(RUN_FILE)]

            results = d.results(Endpoint(bucket=bucket))  # its clients are made once per execution environment

            def read(name: str, bucket: str = bucket, base: str = base, results: ObjectStore = results) -> str:
                return results.read(bucket, base + name).decode()

            run = load_run(read(RUN_FILE), f"s3://{bucket}/{key}")
            got = ingest_run(run, rows_of(run, read), d.store, d.metrics, policy())
            notes.append(f"{key}: {got.stored} rows stored")
            logger.info("fio result ingested", extra={"run_id": got.run_id, "partition": got.partition, "stored": got.stored,
                                                      "verdicts": {r.key: v.verdict if v else "error" for r, v in got.verdicts}})
    except FioResultError as exc:
        d.metrics.count("FioResultsRejected", 1)
        logger.warning("fio result rejected", extra={"message_id": record.message_id, "reason": str(exc)})
        raise
    return notes


handler = sqs_batch_handler(handle_message)
