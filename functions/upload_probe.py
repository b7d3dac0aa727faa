"""Lambda entry point: the handler lives in the layer's package (replmon.entry.upload_probe)."""

from replmon.entry.upload_probe import handler

__all__ = ["handler"]
