"""Lambda entry point of CollectSignals: collect_step of replmon.signals.collector (scheduled)."""

from replmon.entry.runtime import lambda_handler
from replmon.signals.collector import collect_step

handler = lambda_handler(collect_step)
