"""Lambda entry point of Heartbeat: heartbeat_step of replmon.probe.heartbeat (scheduled per RouteGroup)."""

from replmon.entry.runtime import lambda_handler
from replmon.probe.heartbeat import heartbeat_step

handler = lambda_handler(heartbeat_step)
