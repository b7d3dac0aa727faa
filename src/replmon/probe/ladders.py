"""Named probe ladders, read from ``presets.json`` (the one place they are defined).

>>> preset("crr-ladder").sizes[-1] == 80 * 1024**3
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from replmon.core.sizes import parse_size


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    sizes: tuple[int, ...]
    trials: int
    published_latency_seconds: dict[str, tuple[float, float]]


@cache
def _raw() -> dict[str, dict]:
    return json.loads(resources.files("replmon.probe").joinpath("ladders.json").read_text())


def names() -> list[str]:
    return sorted(_raw())


def preset(name: str) -> Preset:
    raw = _raw().get(name)
    if raw is None:
        raise KeyError(f"unknown preset {name!r}; known presets: {', '.join(names())}")
    return Preset(
        name=name,
        description=raw["description"],
        sizes=tuple(parse_size(s) for s in raw["sizes"]),
        trials=int(raw["trials"]),
        published_latency_seconds={k: (v[0], v[1]) for k, v in raw.get("published_latency_seconds", {}).items()},
    )
