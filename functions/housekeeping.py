"""Lambda entry point: the handler lives in the layer's package (replmon.entry.housekeeping)."""

from replmon.entry.housekeeping import handler

__all__ = ["handler"]
