"""Lambda entry point of plan_probes: plan_step of replmon.service (template.yaml's functions/plan_probes.py re-exports it)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import plan_step

handler = lambda_handler(plan_step, traced=False)
