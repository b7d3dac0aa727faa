"""What a probe run measures, validated once at the edge and then passed on typed.

- :class:`ProbeSettings`: sizes, trials, timeout, target, concurrency, polling - everything but
  *where*. The CLI validates its flags into settings before it knows (or starts) a route.
- :class:`ProbeRequest`: settings plus routes. PlanProbes validates the state machine's input
  into one (:func:`load_request`); the CLI and the lab build one with :meth:`ProbeSettings.for_routes`
  and hand it, typed, to the local runner (:mod:`replmon.local.execution`).

Every invalid value becomes one line that names the field and the accepted form:

>>> load_request({"routes": [], "sizes": ["1MiB"]})
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: invalid probe configuration:
  routes: at least one route is required, e.g. [{"name": "primary", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError, config_error
from replmon.core.keys import RUN_ID_PATTERN
from replmon.core.route import Route
from replmon.core.sizes import ACCEPTED_FORM, parse_size
from replmon.probe import ladders

__all__ = ["HEAD_WORST_CASE_SECONDS", "POLL_TIMEOUT_MARGIN_SECONDS", "ConfigError", "PollSettings", "ProbeRequest", "ProbeSettings", "load_request", "load_settings", "poll_timeout_margin"]

#: The longest one S3 HEAD can take under the client policy's control class, retries and backoff
#: included (2 attempts x (3 s connect + 10 s read) + 1 s backoff = 27 s; tests/test_clients.py
#: checks it against adapters/clients.CONTROL.worst_case_seconds).
HEAD_WORST_CASE_SECONDS = 28
#: Seconds of PollReplication's Lambda timeout kept free beyond the inline budget for a route
#: with one destination: the final HEAD, the replica's HEAD, and a sub-second overrun of the budget
#: (poll.sleeps_inline). Each further destination adds one HEAD (:func:`poll_timeout_margin`).
POLL_TIMEOUT_MARGIN_SECONDS = 2 * HEAD_WORST_CASE_SECONDS + 2


def poll_timeout_margin(destinations: int) -> int:
    """PollReplication's margin past its inline budget: the final HEAD plus one HEAD per destination.

    >>> poll_timeout_margin(1), poll_timeout_margin(3)
    (58, 114)
    """
    return POLL_TIMEOUT_MARGIN_SECONDS + max(0, destinations - 1) * HEAD_WORST_CASE_SECONDS


def _sizes(value: object) -> list[int]:
    if isinstance(value, str):
        try:
            return list(ladders.ladder(value.strip()).sizes)
        except KeyError:
            pass  # not a ladder name: one size or a comma-separated list ("1MiB,64MiB")
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a preset name ({', '.join(ladders.names())}) or a non-empty list of sizes, each {ACCEPTED_FORM}")
    try:
        return [parse_size(v) for v in value]
    except ValueError as exc:
        if len(value) == 1 and isinstance(value[0], str) and value[0].strip().replace("-", "").isalpha():
            raise ValueError(f"{value[0]!r} is neither a preset ({', '.join(ladders.names())}) nor a size; use {ACCEPTED_FORM}") from None
        raise exc


class PollSettings(BaseModel):
    """Polling policy knobs (see docs/SEMANTICS.md for the bound they give)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    floor_seconds: float = Field(DEFAULTS.poll.floor_seconds, ge=0.05, le=60)
    relative: float = Field(DEFAULTS.poll.relative, gt=0, le=0.5)
    inline_budget_seconds: float = Field(DEFAULTS.poll.inline_budget_seconds, ge=0, le=840)
    use_history: bool = DEFAULTS.poll.use_history


class ProbeSettings(BaseModel):
    """What one run measures on any route. Every field has a default."""

    # Only PlanProbes (and the CLI) validate requests: other handlers skip building its schema.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)
    sizes: Annotated[list[int], BeforeValidator(_sizes)] = Field(default_factory=lambda: _sizes(DEFAULTS.sizes))
    trials: int = Field(DEFAULTS.trials, ge=1, le=100)
    timeout_seconds: int = Field(DEFAULTS.timeout_seconds, ge=1, le=86_400)
    target_seconds: float = Field(DEFAULTS.target_seconds, gt=0, le=86_400)
    max_concurrency: int = Field(DEFAULTS.max_concurrency, ge=1, le=1000)
    poll: PollSettings = PollSettings()
    run_id: str | None = Field(None, pattern=RUN_ID_PATTERN)  # callers that track the run: '<UTC stamp>-<name>'

    def for_routes(self, routes: Sequence[Route | Mapping[str, Any]]) -> ProbeRequest:
        """These settings on ``routes`` (each a :class:`Route` or its JSON); ConfigError names a bad field."""
        return _validated(ProbeRequest, {**self.model_dump(), "routes": list(routes)})


class ProbeRequest(ProbeSettings):
    """What one run measures, and where."""

    routes: list[Route]

    @field_validator("routes")
    @classmethod
    def _routes(cls, value: list[Route]) -> list[Route]:
        if not value:
            raise ValueError(
                'at least one route is required, e.g. [{"name": "primary", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}]'
            )
        names = [r.name for r in value]
        if len(set(names)) != len(names):
            raise ValueError(f"route names must be unique, got {names}")
        return value

    @property
    def probes(self) -> int:
        """How many probes one run of this request makes (routes x sizes x trials)."""
        return len(self.routes) * len(self.sizes) * self.trials

    def to_input(self) -> dict[str, Any]:
        """The state machine's input for this request (PlanProbes validates it again: its own edge)."""
        return self.model_dump(mode="json", exclude_none=True)


M = TypeVar("M", bound="ProbeSettings")


def _validated(model: type[M], data: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error("probe configuration", exc) from None


def _ladder_trials(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ladder brings its own trial count unless trials are given explicitly."""
    sizes = data.get("sizes")
    if isinstance(sizes, str) and "trials" not in data and sizes.strip() in ladders.names():
        return {**data, "trials": ladders.ladder(sizes.strip()).trials}
    return dict(data)


def _check_inline_budget(settings: ProbeSettings, poll_function_timeout: float | None, destinations: int = 1) -> None:
    limit = DEFAULTS.poll_function_timeout_seconds if poll_function_timeout is None else poll_function_timeout
    budget = settings.poll.inline_budget_seconds
    margin = poll_timeout_margin(destinations)
    if budget + margin > limit:
        raise ConfigError(
            "invalid probe configuration:\n"
            f"  poll.inline_budget_seconds: {budget:g} s does not fit in PollReplication's {limit:g} s timeout "
            f"(it needs {margin} s more for the final HEADs of a route with {destinations} destination(s)); use at most "
            f"{max(0.0, limit - margin):g} (the timeout is fixed: template.yaml Fixed PollFunctionTimeoutSeconds)"
        )


def load_settings(data: Mapping[str, Any], *, poll_function_timeout: float | None = None) -> ProbeSettings:
    """Validate ``data`` (no routes) into :class:`ProbeSettings`: what the CLI does with its flags.

    >>> load_settings({"sizes": "smoke"}).sizes
    [1048576]
    """
    settings = _validated(ProbeSettings, _ladder_trials(data))
    _check_inline_budget(settings, poll_function_timeout)
    return settings


def load_request(
    data: Mapping[str, Any], defaults: Mapping[str, Any] | None = None, *, poll_function_timeout: float | None = None
) -> ProbeRequest:
    """Validate ``data`` (top-level keys override ``defaults``) into a :class:`ProbeRequest`.

    ``sizes`` naming a ladder brings the ladder's trials unless ``data`` sets ``trials``.
    ``poll_function_timeout`` (seconds; PollReplication's Lambda timeout, template.yaml Fixed
    PollFunctionTimeoutSeconds) bounds ``poll.inline_budget_seconds``.
    """
    request = _validated(ProbeRequest, {**(defaults or {}), **_ladder_trials(data or {})})
    _check_inline_budget(request, poll_function_timeout, max((len(r.destinations) for r in request.routes), default=1))
    return request
