"""A :class:`~replmon.core.ports.RegistryStore` in memory, deciding each write's condition as the
table does (adapters/registry_table.py): an ad-hoc run's registry (adapters/memtable.py's table has
none) and tests' where moto's cost is not the point."""

from __future__ import annotations

from threading import Lock

from replmon.core.registry import GroupRead, InvalidRoute, InventoryObservation, Origin, RouteSpec, RouteVerdict

__all__ = ["MemoryRegistry"]


class MemoryRegistry:
    def __init__(self, specs: list[RouteSpec] | None = None) -> None:
        self._items: dict[tuple[str, str], RouteSpec] = {}
        self._lock = Lock()
        for spec in specs or []:
            self._items[(spec.group, spec.name)] = spec

    def routes(self, group: str) -> list[RouteSpec]:
        with self._lock:
            return [s for (g, _), s in sorted(self._items.items()) if g == group]

    def read(self, group: str) -> GroupRead:
        """Every item here is a valid RouteSpec (it is stored parsed): nothing is skipped."""
        return GroupRead(routes=self.routes(group))

    def invalid(self, group: str) -> list[InvalidRoute]:
        return []

    def get_route(self, group: str, name: str) -> RouteSpec | None:
        with self._lock:
            return self._items.get((group, name))

    def put_explicit(self, spec: RouteSpec, expected_version: int | None) -> bool:
        if spec.origin is not Origin.EXPLICIT:
            raise ValueError(f"put_explicit: route {spec.name} has origin {spec.origin.value}, not explicit")
        with self._lock:
            old = self._items.get((spec.group, spec.name))
            if old is not None and (expected_version is None or old.version != expected_version):
                return False
            self._items[(spec.group, spec.name)] = spec.model_copy(update={"version": (expected_version or 0) + 1})
            return True

    def put_discovered(self, spec: RouteSpec) -> bool:
        if spec.origin is not Origin.DISCOVERED:
            raise ValueError(f"put_discovered: route {spec.name} has origin {spec.origin.value}, not discovered")
        with self._lock:
            old = self._items.get((spec.group, spec.name))
            if old is not None and old.origin is not Origin.DISCOVERED:
                return False
            self._items[(spec.group, spec.name)] = spec
            return True

    def observe(self, group: str, name: str, inventory: InventoryObservation, verdict: RouteVerdict) -> None:
        with self._lock:
            old = self._items.get((group, name))
            if old is not None:
                self._items[(group, name)] = old.model_copy(update={"inventory": inventory, "verdict_observed": verdict})

    def delete_route(self, group: str, name: str, origin: str | None = None) -> bool:
        with self._lock:
            old = self._items.get((group, name))
            if old is None or (origin is not None and old.origin.value != origin):
                return False
            del self._items[(group, name)]
            return True
