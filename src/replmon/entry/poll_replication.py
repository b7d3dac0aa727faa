"""Lambda entry point of poll_replication: poll_step of replmon.service (template.yaml's functions/poll_replication.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import poll_step

handler = lambda_handler(poll_step)
