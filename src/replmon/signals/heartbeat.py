"""Heartbeat (issue 21): one scheduled invocation per RouteGroup puts a 1 KiB heartbeat on every
heartbeat route of the group each ``HeartbeatSeconds`` and polls the pending ones, with the
probe's interval semantics, into the same store (``<route>#hb`` records); it keeps each route's
stall state (signals/stall.py) and emits ``StallSeconds{RouteGroup, Route}`` every period.

Contract (the template, the lab and the tests rely on it):
- event ``{"group": "g00"}`` (a RouteGroup of the deployment); the invocation runs for one
  minute (the schedule's rate), a heartbeat period at a time.
- metrics: ``StallSeconds`` per route per period (0 = healthy), ``HeartbeatRun`` per invocation.
- on entering STALLED and on returning HEALTHY: one message to the page topic (``deps.notifier``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def heartbeat_step(event: Mapping[str, Any], deps: Any) -> dict[str, Any]:
    raise NotImplementedError("issue 21: being built")
