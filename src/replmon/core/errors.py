"""Errors every folder may raise: each says what was wrong and how to fix it.

>>> str(ConfigError("invalid probe configuration:\\n  trials: must be at least 1"))
'invalid probe configuration:\\n  trials: must be at least 1'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


class ConfigError(ValueError):
    """Invalid configuration; ``str()`` lists each bad field with its fix, one per line."""


class StoreUnavailable(RuntimeError):
    """The latency store could not be reached or refused the write for a reason other than the
    record already existing (throttling, outage, network): the record must go to the spool."""


def describe(err: Mapping[str, Any]) -> str:
    """One pydantic error as ``  field.path: what to do``."""
    loc = ".".join(str(p) for p in err["loc"]) or "(input)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err["type"] == "missing":
        msg = "is required"
    return f"  {loc}: {msg}"


def config_error(what: str, exc: ValidationError) -> ConfigError:
    """A :class:`ConfigError` listing every field pydantic refused, one per line."""
    return ConfigError(f"invalid {what}:\n" + "\n".join(describe(e) for e in exc.errors()))
