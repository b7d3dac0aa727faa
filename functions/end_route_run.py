"""Lambda entry point: the handler lives in the layer's package (replmon.entry.end_route_run)."""

from replmon.entry.end_route_run import handler

__all__ = ["handler"]
