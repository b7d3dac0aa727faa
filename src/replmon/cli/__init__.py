"""cli: `replmon` - app.py assembles the commands (one module each), which share common.py
(exit codes, flag checks) and render.py (output); no command imports another. Not in the layer.
May import: everything else in replmon."""

from replmon.cli.app import app, main

__all__ = ["app", "main"]
