"""Lambda entry point: plan_step of replmon.service (the logic lives in the layer's domain package)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import plan_step

handler = lambda_handler(plan_step)
