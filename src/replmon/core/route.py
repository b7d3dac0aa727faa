"""The route model: a source bucket, its replication destinations, and where probes live.

Shared by the probes (a request's routes), the passive signals (events map onto routes) and the
fleet (discovery produces routes), so it lives here, validated with pydantic:

>>> r = Route.model_validate({"name": "primary", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]})
>>> (r.prefix, r.destinations[0].bucket)
('replmon-probes/', 'dst')
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from replmon.core.defaults import DEFAULTS
from replmon.core.names import (
    check_account,
    check_bucket,
    check_endpoint_url,
    check_kms_key_arn,
    check_prefix,
    check_region,
    check_role_arn,
    check_route_name,
)


def _blank_is_none(value: object) -> object:
    return None if value == "" else value  # template parameters can only say "unset" as ""


Optional = Annotated[str | None, BeforeValidator(_blank_is_none)]


class Endpoint(BaseModel):
    """A bucket and where to reach it (``endpoint_url`` for S3-compatible servers such as MinIO);
    ``role_arn`` is assumed to reach a bucket in another account (a fleet route's member role);
    ``kms_key_arn`` (the source's SSE-KMS key, a full key ARN) is the key probes are written with."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    bucket: str
    region: Optional = None
    endpoint_url: Optional = None
    account: Optional = None
    role_arn: Optional = None
    kms_key_arn: Optional = None

    _check_bucket = field_validator("bucket")(check_bucket)
    _check_region = field_validator("region")(check_region)
    _check_url = field_validator("endpoint_url")(check_endpoint_url)
    _check_account = field_validator("account")(check_account)
    _check_role = field_validator("role_arn")(check_role_arn)
    _check_kms = field_validator("kms_key_arn")(check_kms_key_arn)


class Destination(Endpoint):
    """A replication destination; ``role_arn`` is assumed to HEAD/delete replicas in another account."""

    rule_id: Optional = None  # the replication rule to this destination (RTC metrics' RuleId); discovery fills it


class Route(BaseModel):
    """One replication path: a source bucket, its destinations, and where probes live."""

    model_config = ConfigDict(extra="forbid")
    name: str
    source: Endpoint
    destinations: list[Destination]
    prefix: str = DEFAULTS.probe_prefix
    seed_prefix: str = DEFAULTS.seed_prefix

    _check_name = field_validator("name")(check_route_name)
    _check_prefix = field_validator("prefix", "seed_prefix")(check_prefix)

    @field_validator("destinations")
    @classmethod
    def _dests(cls, value: list[Destination]) -> list[Destination]:
        if not value:
            raise ValueError('at least one destination is required, e.g. [{"bucket": "dr-replica"}]')
        return value
