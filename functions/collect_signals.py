"""Lambda entry point: the handler lives in the layer's package (replmon.entry.collect_signals)."""

from replmon.entry.collect_signals import handler

__all__ = ["handler"]
