"""Lambda entry point: the handler lives in the layer's package (replmon.entry.fio_task_stopped)."""

from replmon.entry.fio_task_stopped import handler

__all__ = ["handler"]
