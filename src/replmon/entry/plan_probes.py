"""Lambda entry point of plan_probes: plan_step of replmon.probe.steps (template.yaml's functions/plan_probes.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.steps import plan_step

handler = lambda_handler(plan_step, traced=False)
