"""Lambda entry point of Inventory: fleet/inventory.py run_inventory (scheduled; ``{}`` in, a summary
out), and the StackRoute custom resource (fleet/stack_route.py): the registry's writer also writes the
stack's own route when CloudFormation creates, updates or deletes it."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from replmon import wiring
from replmon.core.expert import overlay
from replmon.entry.runtime import lambda_handler
from replmon.fleet.accounts import ENV, load_inventory_settings
from replmon.fleet.inventory import InventoryDeps, run_inventory
from replmon.fleet.stack_route import answer_failed, handle_custom_resource, is_custom_resource
from replmon.wiring import Deps, member_accounts


def inventory_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    settings = load_inventory_settings(json.loads(overlay(os.environ).get(ENV) or "{}"))  # + ExpertSettings' opt_out_tag, workers
    if deps.registry is None or not settings.hub_account:
        raise RuntimeError(f"Inventory needs REPLMON_TABLE and {ENV}.hub_account (template.yaml sets both)")
    now = deps.clock.now()
    summary = run_inventory(InventoryDeps(registry=deps.registry, rows=deps.registry, members=member_accounts(deps.fleet),  # type: ignore[arg-type]
                                          hub_account=settings.hub_account, settings=settings, fleet=deps.fleet,
                                          clock=deps.clock.now), now, now + settings.run_seconds)
    return summary.to_json()


_inventory = lambda_handler(inventory_step)


def handler(event: dict[str, Any], context: Any) -> Any:
    """The schedule's inventory run, or CloudFormation's StackRoute request. The latter is always
    answered, even when the function's own wiring fails: an unanswered request holds the stack
    until its ServiceTimeout."""
    if not is_custom_resource(event):
        return _inventory(event, context)
    try:
        deps = wiring.for_function(getattr(context, "function_name", ""))
        if deps.registry is None:
            raise RuntimeError("StackRoute needs REPLMON_TABLE (template.yaml sets it)")
        registry, groups = deps.registry, deps.fleet.route_groups
    except Exception as exc:  # configuration, not the request: answer FAILED with the reason
        logging.getLogger("replmon").exception("StackRoute: the function's wiring failed")
        return answer_failed(event, f"{type(exc).__name__}: {exc}")
    return handle_custom_resource(event, registry, groups=groups)
