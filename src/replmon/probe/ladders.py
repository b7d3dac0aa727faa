"""Probe ladders: named lists of probe sizes and trials, read from ``ladders.json`` (the one place
they are defined). Users name them with ``--sizes`` or a request's ``sizes`` ("crr-ladder"), and
`replmon presets` lists them; in the code they are *ladders*, so that *presets* means only the
mount presets (:mod:`replmon.mounts.presets`).

>>> ladder("crr-ladder").sizes[-1] == 80 * 1024**3
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from replmon.core.sizes import parse_size


@dataclass(frozen=True)
class Ladder:
    name: str
    description: str
    sizes: tuple[int, ...]
    trials: int
    published_latency_seconds: dict[str, tuple[float, float]]


@cache
def _raw() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(resources.files("replmon.probe").joinpath("ladders.json").read_text())
    return data


def names() -> list[str]:
    return sorted(_raw())


def ladder(name: str) -> Ladder:
    raw = _raw().get(name)
    if raw is None:
        raise KeyError(f"unknown preset {name!r}; known presets: {', '.join(names())}")
    return Ladder(
        name=name,
        description=raw["description"],
        sizes=tuple(parse_size(s) for s in raw["sizes"]),
        trials=int(raw["trials"]),
        published_latency_seconds={k: (v[0], v[1]) for k, v in raw.get("published_latency_seconds", {}).items()},
    )
