"""Lambda entry point of Inventory: fleet/inventory.py run_inventory (scheduled; ``{}`` in, a summary out)."""

from __future__ import annotations

import json
import os
from typing import Any

from replmon.entry.runtime import lambda_handler
from replmon.fleet.accounts import ENV, load_inventory_settings
from replmon.fleet.inventory import InventoryDeps, run_inventory
from replmon.wiring import Deps, member_accounts


def inventory_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    settings = load_inventory_settings(json.loads(os.environ.get(ENV) or "{}"))
    if deps.registry is None or not settings.hub_account:
        raise RuntimeError(f"Inventory needs REPLMON_TABLE and {ENV}.hub_account (template.yaml sets both)")
    now = deps.clock.now()
    summary = run_inventory(InventoryDeps(registry=deps.registry, rows=deps.registry, members=member_accounts(deps.fleet),  # type: ignore[arg-type]
                                          hub_account=settings.hub_account, settings=settings, fleet=deps.fleet,
                                          clock=deps.clock.now), now, now + settings.run_seconds)
    return summary.to_json()


handler = lambda_handler(inventory_step)
