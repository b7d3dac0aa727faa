"""Lambda entry point: the handler lives in the layer's package (replmon.entry.heartbeat)."""

from replmon.entry.heartbeat import handler

__all__ = ["handler"]
