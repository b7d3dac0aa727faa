"""Lambda entry point of Inventory: fleet/inventory.py run_inventory (scheduled; ``{}`` in, a summary
out), and the StackRoute custom resource (fleet/stack_route.py): the registry's writer also writes the
stack's own route when CloudFormation creates, updates or deletes it."""

from __future__ import annotations

import json
import os
from typing import Any

from replmon.entry.runtime import lambda_handler
from replmon.fleet.accounts import ENV, load_inventory_settings
from replmon.fleet.inventory import InventoryDeps, run_inventory
from replmon.fleet.stack_route import handle_custom_resource, is_custom_resource
from replmon.wiring import Deps, member_accounts


def inventory_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    if is_custom_resource(event):
        if deps.registry is None:
            raise RuntimeError("StackRoute needs REPLMON_TABLE (template.yaml sets it)")
        return handle_custom_resource(event, deps.registry, groups=deps.fleet.route_groups)
    settings = load_inventory_settings(json.loads(os.environ.get(ENV) or "{}"))
    if deps.registry is None or not settings.hub_account:
        raise RuntimeError(f"Inventory needs REPLMON_TABLE and {ENV}.hub_account (template.yaml sets both)")
    now = deps.clock.now()
    summary = run_inventory(InventoryDeps(registry=deps.registry, rows=deps.registry, members=member_accounts(deps.fleet),  # type: ignore[arg-type]
                                          hub_account=settings.hub_account, settings=settings, fleet=deps.fleet,
                                          clock=deps.clock.now), now, now + settings.run_seconds)
    return summary.to_json()


handler = lambda_handler(inventory_step)
