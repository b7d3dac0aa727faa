"""Lambda entry point of plan_probes: plan_step of replmon.fleet.planner - the fleet plan from the
registry for the schedule's input, else probe/steps.py's request plan (template.yaml's
functions/plan_probes.py re-exports it)."""

from replmon.entry.runtime import lambda_handler
from replmon.fleet.planner import plan_step

handler = lambda_handler(plan_step, traced=False)
