"""Lambda entry point: the handler lives in the layer's package (replmon.entry.poll_replication)."""

from replmon.entry.poll_replication import handler

__all__ = ["handler"]
