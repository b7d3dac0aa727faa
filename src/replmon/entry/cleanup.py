"""Lambda entry point of cleanup: cleanup_step of replmon.probe.steps (template.yaml's functions/cleanup.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import cleanup_step

handler = lambda_handler(cleanup_step)
