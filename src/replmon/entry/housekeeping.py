"""Lambda entry point of housekeeping: housekeeping_step of replmon.probe.housekeeping (template.yaml's functions/housekeeping.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.housekeeping import housekeeping_step

handler = lambda_handler(housekeeping_step)
