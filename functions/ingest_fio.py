"""Lambda entry point: the handler lives in the layer's package (replmon.entry.ingest_fio)."""

from replmon.entry.ingest_fio import handler

__all__ = ["handler"]
