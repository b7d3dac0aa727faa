"""Lambda entry point: the handler lives in the layer's package (replmon.entry.inventory)."""

from replmon.entry.inventory import handler

__all__ = ["handler"]
