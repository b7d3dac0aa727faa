"""Lambda entry point of record_result: record_step of replmon.service (template.yaml's functions/record_result.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import record_step

handler = lambda_handler(record_step)
