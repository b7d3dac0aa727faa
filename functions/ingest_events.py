"""Lambda entry point: the handler lives in the layer's package (replmon.entry.ingest_events)."""

from replmon.entry.ingest_events import handler

__all__ = ["handler"]
