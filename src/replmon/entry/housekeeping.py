"""Lambda entry point of housekeeping: housekeeping_step of replmon.service (template.yaml's functions/housekeeping.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import housekeeping_step

handler = lambda_handler(housekeeping_step)
