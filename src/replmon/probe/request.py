"""Probe configuration: routes, sizes, trials, timeout and target, validated with pydantic.

Every invalid value becomes one line that names the field and the accepted form:

>>> load_request({"routes": [], "sizes": ["1MiB"]})
Traceback (most recent call last):
...
replmon.probe.request.ConfigError: invalid probe configuration:
  routes: at least one route is required, e.g. [{"name": "primary", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}]
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from replmon.core.defaults import DEFAULTS
from replmon.core.keys import RUN_ID_PATTERN
from replmon.core.sizes import ACCEPTED_FORM, parse_size
from replmon.probe import ladders as presets

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](--[a-z0-9-]+--x-s3)?$")
_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

#: Seconds of PollReplication's Lambda timeout kept free beyond the inline budget: the final HEAD,
#: one HEAD per destination to verify replicas (each bounded by the S3 read timeout, 10 s) and a
#: sub-second overrun of the budget (poller.sleeps_inline).
POLL_TIMEOUT_MARGIN_SECONDS = 30


class ConfigError(ValueError):
    """Invalid configuration; ``str()`` lists each bad field with its fix."""


def _bucket(value: str) -> str:
    if not isinstance(value, str) or not _BUCKET_RE.match(value) or ".." in value:
        raise ValueError("must be an S3 bucket name: 3-63 lowercase letters, digits, dots or hyphens, e.g. 'dr-source-bucket'")
    return value


def _region(value: str | None) -> str | None:
    if value is not None and not _REGION_RE.match(value):
        raise ValueError("must be an AWS region code such as 'us-east-1' or 'ap-southeast-1'")
    return value


def _prefix(value: str) -> str:
    if not value or value.startswith("/") or not value.endswith("/"):
        raise ValueError("must be a key prefix ending in '/', without a leading '/', e.g. 'replmon-probes/'")
    return value


def _blank_is_none(value: Any) -> Any:
    return None if value == "" else value  # template parameters can only say "unset" as ""


Optional = Annotated[str | None, BeforeValidator(_blank_is_none)]


class Endpoint(BaseModel):
    """A bucket and where to reach it (``endpoint_url`` for S3-compatible servers such as MinIO)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    bucket: str
    region: Optional = None
    endpoint_url: Optional = None

    _check_bucket = field_validator("bucket")(_bucket)
    _check_region = field_validator("region")(_region)

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/\s]+/?$", value):
            raise ValueError("must be an http(s) URL with no path, e.g. 'http://127.0.0.1:9000'")
        return value


class Destination(Endpoint):
    """A replication destination; ``role_arn`` is assumed to HEAD/delete replicas in another account."""

    account: Optional = None
    role_arn: Optional = None
    rule_id: Optional = None  # the replication rule to this destination (RTC metrics' RuleId); discovery fills it

    @field_validator("account")
    @classmethod
    def _account(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^\d{12}$", value):
            raise ValueError("must be a 12-digit AWS account id")
        return value

    @field_validator("role_arn")
    @classmethod
    def _role(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$", value):
            raise ValueError("must be an IAM role ARN, e.g. 'arn:aws:iam::123456789012:role/replmon-reader'")
        return value


class Route(BaseModel):
    """One replication path: a source bucket, its destinations, and where probes live."""

    model_config = ConfigDict(extra="forbid")
    name: str
    source: Endpoint
    destinations: list[Destination]
    prefix: str = DEFAULTS.probe_prefix
    seed_prefix: str = DEFAULTS.seed_prefix

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
            raise ValueError("must be 1-64 letters, digits, '.', '_' or '-', e.g. 'use1-to-usw2'")
        return value

    @field_validator("destinations")
    @classmethod
    def _dests(cls, value: list[Destination]) -> list[Destination]:
        if not value:
            raise ValueError('at least one destination is required, e.g. [{"bucket": "dr-replica"}]')
        return value

    _check_prefix = field_validator("prefix", "seed_prefix")(_prefix)


def _sizes(value: Any) -> list[int]:
    if isinstance(value, str):
        try:
            return list(presets.preset(value.strip()).sizes)
        except KeyError:
            pass  # not a preset name: one size or a comma-separated list ("1MiB,64MiB")
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a preset name ({', '.join(presets.names())}) or a non-empty list of sizes, each {ACCEPTED_FORM}")
    try:
        return [parse_size(v) for v in value]
    except ValueError as exc:
        if len(value) == 1 and isinstance(value[0], str) and value[0].strip().replace("-", "").isalpha():
            raise ValueError(f"{value[0]!r} is neither a preset ({', '.join(presets.names())}) nor a size; use {ACCEPTED_FORM}") from None
        raise exc


class PollSettings(BaseModel):
    """Polling policy knobs (see docs/SEMANTICS.md for the bound they give)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    floor_seconds: float = Field(DEFAULTS.poll.floor_seconds, ge=0.05, le=60)
    relative: float = Field(DEFAULTS.poll.relative, gt=0, le=0.5)
    inline_budget_seconds: float = Field(DEFAULTS.poll.inline_budget_seconds, ge=0, le=840)
    use_history: bool = DEFAULTS.poll.use_history


class ProbeRequest(BaseModel):
    """What one run measures. Every field but ``routes`` has a default."""

    # Only PlanProbes (and the CLI) validate requests: other handlers skip building its schema.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)
    routes: list[Route]
    sizes: Annotated[list[int], BeforeValidator(_sizes)] = Field(default_factory=lambda: _sizes(DEFAULTS.sizes))
    trials: int = Field(DEFAULTS.trials, ge=1, le=100)
    timeout_seconds: int = Field(DEFAULTS.timeout_seconds, ge=1, le=86_400)
    target_seconds: float = Field(DEFAULTS.target_seconds, gt=0, le=86_400)
    max_concurrency: int = Field(DEFAULTS.max_concurrency, ge=1, le=1000)
    poll: PollSettings = PollSettings()
    run_id: str | None = Field(None, pattern=RUN_ID_PATTERN)  # callers that track the run: '<UTC stamp>-<name>'

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


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "(input)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field; remove it or check its spelling"
    elif err["type"] == "missing":
        msg = "is required"
    return f"  {loc}: {msg}"


def _preset_trials(data: dict[str, Any]) -> dict[str, Any]:
    """A preset brings its own trial count unless trials are given explicitly."""
    sizes = data.get("sizes")
    if isinstance(sizes, str) and "trials" not in data and sizes.strip() in presets.names():
        return {**data, "trials": presets.preset(sizes.strip()).trials}
    return data


def load_request(
    data: dict[str, Any], defaults: dict[str, Any] | None = None, *, poll_function_timeout: float | None = None
) -> ProbeRequest:
    """Validate ``data`` (top-level keys override ``defaults``) into a :class:`ProbeRequest`.

    ``sizes`` naming a preset brings the preset's trials unless ``data`` sets ``trials``.
    ``poll_function_timeout`` (seconds; PollReplication's Lambda timeout, template parameter
    PollFunctionTimeoutSeconds) bounds ``poll.inline_budget_seconds``.
    """
    merged = {**(defaults or {}), **_preset_trials(data or {})}
    try:
        request = ProbeRequest.model_validate(merged)
    except ValidationError as exc:
        lines = "\n".join(_describe(e) for e in exc.errors())  # type: ignore[arg-type]
        raise ConfigError(f"invalid probe configuration:\n{lines}") from None
    limit = DEFAULTS.poll_function_timeout_seconds if poll_function_timeout is None else poll_function_timeout
    budget = request.poll.inline_budget_seconds
    if budget + POLL_TIMEOUT_MARGIN_SECONDS > limit:
        raise ConfigError(
            "invalid probe configuration:\n"
            f"  poll.inline_budget_seconds: {budget:g} s does not fit in PollReplication's {limit:g} s timeout "
            f"(it needs {POLL_TIMEOUT_MARGIN_SECONDS} s more for the final HEADs); use at most "
            f"{max(0.0, limit - POLL_TIMEOUT_MARGIN_SECONDS):g}, or raise the PollFunctionTimeoutSeconds parameter"
        )
    return request
