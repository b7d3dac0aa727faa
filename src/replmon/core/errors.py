"""Errors every folder may raise: each says what was wrong and how to fix it.

>>> str(ConfigError("invalid probe configuration:\\n  trials: must be at least 1"))
'invalid probe configuration:\\n  trials: must be at least 1'
"""

from __future__ import annotations


class ConfigError(ValueError):
    """Invalid configuration; ``str()`` lists each bad field with its fix, one per line."""


class StoreUnavailable(RuntimeError):
    """The latency store could not be reached or refused the write for a reason other than the
    record already existing (throttling, outage, network): the record must go to the spool."""
