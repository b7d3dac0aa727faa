"""The registry's write rules (docs/design/fleet.md 1), over any :class:`~replmon.core.ports.RegistryStore`.

- **Explicit wins**: a discovered route never replaces an explicit one of the same name (the store's
  condition); the inventory then records only what it saw (``observe``: drift is shown, not applied).
- **One probing route per source bucket**: a discovered route whose source bucket an explicit
  route already measures is written in mode ``off``, reason ``SUPERSEDED``, ``superseded_by`` set
  (listed, never dropped).
- **Group moves**: a route's group is ``group_of(name, RouteGroups)``; when ``RouteGroups`` changes,
  each route is written to its new group (conditional, as any write) and then deleted from the old
  one (only if its origin is unchanged), so an interrupted move is finished by the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from replmon.core.ports import RegistryStore
from replmon.core.registry import (
    MAX_ROUTE_GROUPS,
    InventoryObservation,
    Origin,
    Reason,
    RouteSpec,
    RouteVerdict,
    group_names,
    group_of,
)

log = logging.getLogger(__name__)


def all_routes(store: RegistryStore, groups: int = MAX_ROUTE_GROUPS) -> list[RouteSpec]:
    """Every route of the first ``groups`` groups (all 8 by default: a route not yet moved is found too)."""
    return [spec for g in group_names(groups) for spec in store.routes(g)]


def explicit_sources(specs: Iterable[RouteSpec]) -> dict[str, str]:
    """Source bucket -> name of the explicit route that measures it (the inventory supersedes the rest)."""
    return {s.source.bucket: s.name for s in sorted(specs, key=lambda s: s.name) if s.origin is Origin.EXPLICIT}


def supersede(spec: RouteSpec, by: str, checked_at: float) -> RouteSpec:
    """The discovered ``spec`` hidden by the explicit route ``by`` (same source bucket)."""
    detail = f"explicit route {by!r} measures source bucket {spec.source.bucket}; this discovered route is listed only"
    return spec.model_copy(update={"verdict": RouteVerdict.of(Reason.SUPERSEDED, detail, checked_at), "superseded_by": by})


def register_discovered(store: RegistryStore, spec: RouteSpec, run_id: str, observed: dict[str, object]) -> str:
    """Write one discovered route; ``"written"`` or, when an explicit route holds the name, ``"observed"``
    (only its ``inventory`` and ``verdict_observed`` are set)."""
    if spec.origin is not Origin.DISCOVERED:
        raise ValueError(f"register_discovered: {spec.name} is {spec.origin.value}")
    if store.put_discovered(spec):
        return "written"
    seen_at = spec.inventory.seen_at if spec.inventory else (spec.verdict.checked_at or 0.0)
    store.observe(spec.group, spec.name, InventoryObservation(seen_at=seen_at, run_id=run_id, observed=observed), spec.verdict)
    return "observed"


def move_groups(store: RegistryStore, groups: int) -> list[str]:
    """Move every route whose group changed with ``RouteGroups = groups``; the names moved."""
    moved: list[str] = []
    for old in all_routes(store):
        new_group = group_of(old.name, groups)
        if new_group == old.group:
            continue
        new = old.model_copy(update={"group": new_group})
        # an explicit route's version restarts at 1 in its new group: an edit that read the old item fails and re-reads
        written = store.put_explicit(new, None) if old.origin is Origin.EXPLICIT else store.put_discovered(new)
        if not written:
            there = store.get_route(new_group, old.name)
            if there is None or there.origin is not old.origin:
                log.warning("route %s: not moved from %s to %s (an %s route holds the name there)", old.name, old.group,
                            new_group, there.origin.value if there else "unknown")
                continue
            # an earlier move wrote the new item and stopped before the delete: finish it
        store.delete_route(old.group, old.name, origin=old.origin.value)
        log.info("route %s moved from %s to %s (RouteGroups=%d)", old.name, old.group, new_group, groups)
        moved.append(old.name)
    return moved


class PreviewRegistry:
    """A :class:`RegistryStore` (and InventoryStore) that reads through to ``store`` and records every
    write instead of making it, deciding each condition the way the table would
    (``replmon fleet inventory --dry-run``)."""

    def __init__(self, store: RegistryStore) -> None:
        self.store = store
        self.writes: list[dict[str, object]] = []
        self._written: dict[tuple[str, str], RouteSpec | None] = {}

    def _current(self, group: str, name: str) -> RouteSpec | None:
        if (group, name) in self._written:
            return self._written[(group, name)]
        return self.store.get_route(group, name)

    def routes(self, group: str) -> list[RouteSpec]:
        return self.store.routes(group)

    def get_route(self, group: str, name: str) -> RouteSpec | None:
        return self._current(group, name)

    def put_explicit(self, spec: RouteSpec, expected_version: int | None) -> bool:
        old = self._current(spec.group, spec.name)
        ok = old is None or (expected_version is not None and old.version == expected_version)
        self.writes.append({"op": "put_explicit", "route": spec.name, "group": spec.group, "applied": ok})
        if ok:
            self._written[(spec.group, spec.name)] = spec.model_copy(update={"version": (expected_version or 0) + 1})
        return ok

    def put_discovered(self, spec: RouteSpec) -> bool:
        old = self._current(spec.group, spec.name)
        ok = old is None or old.origin is Origin.DISCOVERED
        self.writes.append({"op": "put_discovered", "route": spec.name, "group": spec.group, "applied": ok,
                            "reason": spec.verdict.reason_code.value})
        if ok:
            self._written[(spec.group, spec.name)] = spec
        return ok

    def observe(self, group: str, name: str, inventory: InventoryObservation, verdict: RouteVerdict) -> None:
        self.writes.append({"op": "observe", "route": name, "group": group, "applied": self._current(group, name) is not None,
                            "reason": verdict.reason_code.value})

    def delete_route(self, group: str, name: str, origin: str | None = None) -> bool:
        old = self._current(group, name)
        ok = old is not None and (origin is None or old.origin.value == origin)
        self.writes.append({"op": "delete", "route": name, "group": group, "applied": ok})
        if ok:
            self._written[(group, name)] = None
        return ok

    # InventoryStore: the account rows are printed, the checkpoint never written
    def put_account(self, account: str, row: Mapping[str, Any]) -> None:
        self.writes.append({"op": "put_account", "account": account, "applied": True, "status": row.get("status")})

    def accounts(self) -> dict[str, dict[str, Any]]:
        return {}

    def checkpoint(self) -> dict[str, Any] | None:
        return None

    def put_checkpoint(self, state: Mapping[str, Any] | None) -> None:
        if state is not None:
            self.writes.append({"op": "put_checkpoint", "account": state.get("account"), "applied": True})

    def take_run(self, holder: str, now: float, until: float) -> dict[str, Any] | None:
        return None  # a dry run writes nothing, so it needs no lease

    def end_run(self, holder: str) -> None:
        return None
