"""Lambda entry point: poll_step of replmon.service (the logic lives in the layer's domain package)."""

from replmon.lambda_entry import lambda_handler
from replmon.service import poll_step

handler = lambda_handler(poll_step)
