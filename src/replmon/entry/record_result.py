"""Lambda entry point of record_result: record_step of replmon.probe.steps (template.yaml's functions/record_result.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import record_step

handler = lambda_handler(record_step)
