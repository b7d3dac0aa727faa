"""Lambda entry point of upload_probe: upload_step of replmon.probe.steps (template.yaml's functions/upload_probe.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import upload_step

handler = lambda_handler(upload_step)
