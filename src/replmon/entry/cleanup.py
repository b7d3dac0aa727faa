"""Lambda entry point of cleanup: cleanup_step of replmon.service (template.yaml's functions/cleanup.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import cleanup_step

handler = lambda_handler(cleanup_step)
