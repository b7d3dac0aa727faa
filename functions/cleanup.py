"""Lambda entry point: the handler lives in the layer's package (replmon.entry.cleanup)."""

from replmon.entry.cleanup import handler

__all__ = ["handler"]
