"""Lambda entry point of upload_probe: upload_step of replmon.service (template.yaml's functions/upload_probe.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import upload_step

handler = lambda_handler(upload_step)
