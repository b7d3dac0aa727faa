"""Lambda entry point: the handler lives in the layer's package (replmon.entry.record_result)."""

from replmon.entry.record_result import handler

__all__ = ["handler"]
