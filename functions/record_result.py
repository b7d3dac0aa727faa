"""Lambda entry point: record_step of replmon.service (the logic lives in the layer's domain package)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import record_step

handler = lambda_handler(record_step)
