"""Lambda entry point of CollectSignals: collect_step of replmon.probe.steps (scheduled)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import collect_step

handler = lambda_handler(collect_step)
