"""What a deployed stack really did in a stepped window, counted the way AWS bills it: the AWS API
calls by service and operation, the distinct custom metric series and the hours each received
data, the series each Metrics Insights alarm of template.yaml analyzed, and Lambda invocations
and GB-seconds per function (cost/fleet.py's model is checked against these: tests/deployed/
test_deployed_cost.py).

- **Calls**: every call a function made, as the harness's IAM gate saw it (``DeployedStack.calls``);
  the harness's own set-up calls (no function) are not the deployment's.
- **Series**: a (metric, dimensions) pair of the EMF the handlers printed; CloudWatch bills a custom
  metric for each hour it receives data, prorated ("CloudWatch pricing", metrics).
- **Metrics Insights**: for each alarm whose query CloudWatch runs (template.yaml ``Metrics`` with
  an ``Expression``), the series its ``SCHEMA`` and ``WHERE`` match, and their hours with data.
- **Lambda**: each invocation's duration on the stack's stepped clock (its sleeps and the Waits it
  rides out advance it; an API call takes no time in moto), times the function's ``MemorySize``
  from template.yaml: *measured on the stepped clock*, so a handler that polls until a deadline
  counts its deadline.

>>> c = Counts(hours=1.0, routes=2)
>>> c.series_hours[("RpoSeconds", (("Route", "r"),))] = {0}
>>> c.metric_hours_per_route()
0.5
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replmon.core.telemetry import NAMESPACE, ROUTE
from replmon.local.insights import parse

if TYPE_CHECKING:
    from replmon.local.stack import DeployedStack

Series = tuple[str, tuple[tuple[str, str], ...]]  # (metric, sorted dimensions)


@dataclass
class Counts:
    """One window's counts (``hours`` long) over ``routes`` routes."""

    hours: float
    routes: int
    since: float = 0.0
    until: float = 0.0
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (service, operation) -> calls
    calls_by_function: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (function, service, operation)
    series_hours: dict[Series, set[int]] = field(default_factory=dict)  # series -> the hours (index) it had data in
    analyzed: dict[str, dict[Series, set[int]]] = field(default_factory=dict)  # MI alarm -> series it matched -> hours
    invocations: Counter[str] = field(default_factory=Counter)
    gb_seconds: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)  # each invocation's duration, per function
    log_bytes: Counter[str] = field(default_factory=Counter)  # function -> bytes printed (EMF and log lines)
    transitions: int = 0  # Step Functions state transitions of the executions started in the window (their own)
    executions: int = 0
    replicated_bytes: Counter[str] = field(default_factory=Counter)  # function whose PUT S3 replicated -> bytes

    def per_route_series(self) -> dict[Series, set[int]]:
        return {s: h for s, h in self.series_hours.items() if ROUTE in dict(s[1])}

    def metric_hours_per_route(self) -> float:
        """Billed metric-hours of the per-route series, per route and per hour of the window (1.0 = one
        metric-month a month)."""
        return sum(len(h) for h in self.per_route_series().values()) / self.routes / self.hours

    def analyzed_hours_per_route(self) -> float:
        """Metric-hours the Metrics Insights alarms analyzed (series with data in an hour), per route
        and hour of the window."""
        return sum(len(h) for alarm in self.analyzed.values() for h in alarm.values()) / self.routes / self.hours

    def per_route_month(self, n: float, month_hours: float = 720.0) -> float:
        """A count over the window as a per route, per month figure."""
        return n / self.routes / self.hours * month_hours


def count(stack: DeployedStack, since: float, until: float, routes: int) -> Counts:
    """What ``stack`` did from ``since`` to ``until`` (stack clock), over ``routes`` routes."""
    hours = (until - since) / 3600
    out = Counts(hours=hours, routes=routes, since=since, until=until)
    for c in stack.calls:
        if since <= c.at < until and c.function not in ("?", None) and not c.principal.endswith(":role/harness-admin"):
            out.calls[(c.service, c.operation)] += 1
            out.calls_by_function[(c.function, c.service, c.operation)] += 1
    memory = function_memory(stack.template)
    for inv in stack.invocations:
        if since <= inv.at < until:
            seconds = max(0.0, (inv.ended if inv.ended is not None else inv.at) - inv.at)
            out.invocations[inv.function] += 1
            out.seconds.setdefault(inv.function, []).append(seconds)
            # Lambda bills by the millisecond, at least 1 ms (Lambda pricing)
            out.gb_seconds[inv.function] = out.gb_seconds.get(inv.function, 0.0) + max(seconds, 0.001) * memory[inv.function] / 1024
    for function, doc in stack.emf:
        at = doc["_aws"]["Timestamp"] / 1000
        if not since <= at < until:
            continue
        hour = int((at - since) // 3600)
        out.log_bytes[function] += len(json.dumps(doc, separators=(",", ":"))) + 1  # EMF is ingested as log bytes
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            if directive.get("Namespace") != NAMESPACE:
                continue
            for dims in directive["Dimensions"]:
                key = tuple(sorted((d, str(doc[d])) for d in dims))
                for m in directive["Metrics"]:
                    out.series_hours.setdefault((m["Name"], key), set()).add(hour)
    out.executions, out.transitions = state_transitions(stack, since, until)
    sizes: dict[str, tuple[str, int]] = {}  # object key -> (the function that PUT it, its bytes)
    for call in stack.calls:
        if call.operation == "PutObject" and since <= call.at < until and isinstance(call.params.get("Body"), bytes | bytearray):
            sizes[call.params["Key"]] = (call.function, len(call.params["Body"]))
    for (_dst, replica_key, _version) in list(stack._replicas):
        if replica_key in sizes:
            out.replicated_bytes[sizes[replica_key][0]] += sizes[replica_key][1]
    for function, line in stack.logs:  # what the handlers printed besides EMF (not stamped: the whole run)
        out.log_bytes[function] += len(line) + 1
    for alarm, props in mi_alarms(stack).items():
        q = parse(props)
        matched = out.analyzed.setdefault(alarm, {})
        for (metric, key), seen in out.series_hours.items():
            dims = dict(key)
            if metric == q.metric and q.schema is not None and set(dims) == set(q.schema) and all(dims.get(k) == v for k, op, v in q.where if op == "="):
                matched[(metric, key)] = seen
    return out


def function_memory(template: dict[str, Any]) -> dict[str, int]:
    """Each function's MemorySize in MB (its own, else Globals.Function's), by handler name."""
    default = int(template.get("Globals", {}).get("Function", {}).get("MemorySize", 128))
    out: dict[str, int] = {}
    for logical, res in template["Resources"].items():
        if res.get("Type") == "AWS::Serverless::Function":
            size = res.get("Properties", {}).get("MemorySize", default)
            out[logical.removesuffix("Function")] = int(size) if isinstance(size, int | str) and str(size).isdigit() else default
    return out


def mi_alarms(stack: DeployedStack) -> dict[str, str]:
    """The deployment's Metrics Insights alarms (those that exist): logical id -> query."""
    out = {}
    for name, res in stack.template["Resources"].items():
        props = res.get("Properties", {})
        if res.get("Type") != "AWS::CloudWatch::Alarm" or "Metrics" not in props or not stack.resolver.exists(name):
            continue
        for m in stack.resolver.resolve(props["Metrics"]):
            if str(m.get("Expression", "")).startswith("SELECT"):
                out[name] = m["Expression"]
    return out


def state_transitions(stack: DeployedStack, since: float, until: float) -> tuple[int, int]:
    """(executions, state transitions) of the probe state machine's executions started in the window:
    every state entered in the execution's own history (Step Functions bills a Standard workflow per
    state transition: "AWS Step Functions pricing"); the Map's child workflows are not in it."""
    sfn = stack.machine.sfn
    executions = transitions = 0
    for arn, started in stack.execution_starts.items():
        if not since <= started < until:
            continue
        executions += 1
        for hist in sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
            transitions += sum(1 for ev in hist["events"] if ev["type"].endswith("StateEntered"))
    return executions, transitions
