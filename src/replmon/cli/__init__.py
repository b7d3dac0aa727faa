"""`replmon`: the command line (not shipped in the Lambda layer)."""

from replmon.cli.app import app, main

__all__ = ["app", "main"]
