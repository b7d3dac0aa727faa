"""Lambda entry point: the handler lives in the layer's package (replmon.entry.plan_probes)."""

from replmon.entry.plan_probes import handler

__all__ = ["handler"]
