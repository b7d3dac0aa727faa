"""Lambda entry point of EndRouteRun: end_run of replmon.fleet.lease (a route's lease when its last
probe ends - the Map's EndProbe -, and the run's remaining leases at its end)."""

from replmon.entry.runtime import lambda_handler
from replmon.fleet.lease import end_run

handler = lambda_handler(end_run)
