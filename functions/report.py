"""Lambda entry point: the handler lives in the layer's package (replmon.entry.report)."""

from replmon.entry.report import handler

__all__ = ["handler"]
