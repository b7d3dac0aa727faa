"""Lambda entry point of EndRouteRun: end_run of replmon.fleet.lease (give the run's leases back)."""

from replmon.entry.runtime import lambda_handler
from replmon.fleet.lease import end_run

handler = lambda_handler(end_run)
