"""Lambda entry point of poll_replication: poll_step of replmon.probe.steps (template.yaml's functions/poll_replication.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import poll_step

handler = lambda_handler(poll_step)
