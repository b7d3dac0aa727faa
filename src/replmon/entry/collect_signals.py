"""Lambda entry point of CollectSignals: collect_step of replmon.service (scheduled)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import collect_step

handler = lambda_handler(collect_step)
