"""Lambda entry point of BeginRouteRun: begin_run of replmon.fleet.lease (take each route's lease, record skips)."""

from replmon.entry.runtime import lambda_handler
from replmon.fleet.lease import begin_run

handler = lambda_handler(begin_run)
