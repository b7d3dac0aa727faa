"""The stack's own route as a registry item: the one list of routes holds it like any other.

template.yaml's route parameters (RouteName, the bucket pair, DestinationRegion, DestinationRoleArn,
ReplicationRuleId, ProbePrefix...) are the properties of one custom resource, ``StackRoute``, which
the Inventory function serves (entry/inventory.py): on Create and Update it writes the route as an
explicit item with ``managed_by: stack`` (:func:`upsert_stack_route`, idempotent), on Delete it
removes it (:func:`delete_stack_route`), and when RouteName changes CloudFormation deletes the old
name after the new one is written (the physical id is the route name). A fleet-only hub (BucketMode
existing, no SourceBucketName) has no such resource and no route of its own.

Everything else reads the route through the registry port: PlanProbes and the Heartbeat probe it,
CollectSignals judges it, IngestEvents files its events, Report lists it. It is reached as the
template grants it (core/registry.py ``to_route``): the functions' own credentials, and
DestinationRoleArn for a destination in another account.

>>> spec = stack_route_spec({"RouteName": "primary", "Account": "111122223333", "Region": "us-east-1",
...     "SourceBucket": "src", "DestinationBucket": "dst", "DestinationRegion": "",
...     "DestinationRoleArn": "arn:aws:iam::444455556666:role/replmon-dst", "RuleId": "replmon-probes"}, groups=1)
>>> (spec.origin.value, spec.managed_by, spec.destinations[0].account, spec.destinations[0].region)
('explicit', 'stack', '444455556666', 'us-east-1')
>>> r = spec.to_route("replmon")
>>> (r.source.role_arn, r.destinations[0].role_arn, r.destinations[0].rule_id)
(None, 'arn:aws:iam::444455556666:role/replmon-dst', 'replmon-probes')
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.ports import RegistryStore
from replmon.core.registry import MAX_ROUTE_GROUPS, Origin, RouteSpec, group_names, group_of, load_route_spec
from replmon.core.route import Route

__all__ = ["delete_stack_route", "handle_custom_resource", "is_custom_resource", "spec_of_route", "stack_route_spec",
           "upsert_stack_route"]

log = logging.getLogger("replmon")

#: The custom resource's properties (template.yaml StackRoute), each a template parameter.
PROPERTIES = {
    "RouteName": "RouteName", "Account": "AWS::AccountId", "Region": "AWS::Region", "SourceBucket": "SourceBucketName",
    "SourceKmsKeyArn": "SourceKmsKeyArn", "DestinationBucket": "DestinationBucketName", "DestinationRegion": "DestinationRegion",
    "DestinationRoleArn": "DestinationRoleArn", "RuleId": "ReplicationRuleId", "Prefix": "ProbePrefix", "SeedPrefix": "SeedPrefix",
}


def _account_of(role_arn: str) -> str:
    parts = role_arn.split(":")
    if len(parts) < 6 or not parts[4].isdigit():
        raise ConfigError(f"DestinationRoleArn: {role_arn!r} is not a role ARN (arn:aws:iam::<account>:role/<name>)")
    return parts[4]


def stack_route_spec(props: Mapping[str, Any], *, groups: int) -> RouteSpec:
    """The registry item of the stack's route from the custom resource's properties (empty strings:
    not set). ConfigError names the template parameter of a bad value."""
    def get(key: str) -> str | None:
        value = props.get(key)
        return str(value) if value not in (None, "") else None

    name, account, region = get("RouteName"), get("Account"), get("Region")
    missing = [PROPERTIES[k] for k, v in (("RouteName", name), ("SourceBucket", get("SourceBucket")),
                                          ("DestinationBucket", get("DestinationBucket")), ("Account", account), ("Region", region)) if not v]
    if missing:
        raise ConfigError(f"StackRoute: {', '.join(missing)} must be set for the stack's own route (BucketMode=existing with "
                          "no SourceBucketName makes a fleet-only hub, which has none)")
    role = get("DestinationRoleArn")
    try:
        return load_route_spec({
            "name": name, "group": group_of(str(name), groups), "origin": Origin.EXPLICIT.value, "managed_by": "stack",
            "prefix": get("Prefix") or DEFAULTS.probe_prefix, "seed_prefix": get("SeedPrefix") or DEFAULTS.seed_prefix,
            "source": {"account": account, "region": region, "bucket": get("SourceBucket"), "kms_key_arn": get("SourceKmsKeyArn")},
            "destinations": [{"account": _account_of(role) if role else account, "region": get("DestinationRegion") or region,
                              "bucket": get("DestinationBucket"), "rule_id": get("RuleId"), "role_arn": role}],
        })
    except ConfigError as exc:
        raise ConfigError(f"StackRoute (template parameters {', '.join(sorted(set(PROPERTIES.values()) - {'AWS::AccountId', 'AWS::Region'}))}): {exc}") from None


def spec_of_route(route: Route, *, groups: int, account: str = "000000000000", region: str = "us-east-1") -> RouteSpec:
    """A stack-managed registry item for a :class:`Route` of the caller's own (the lab's MinIO pair,
    a chaos run's route): reached with the caller's credentials, as the stack's route is."""
    return load_route_spec({
        "name": route.name, "group": group_of(route.name, groups), "origin": Origin.EXPLICIT.value, "managed_by": "stack",
        "prefix": route.prefix, "seed_prefix": route.seed_prefix,
        "source": {"account": route.source.account or account, "region": route.source.region or region, "bucket": route.source.bucket,
                   "endpoint_url": route.source.endpoint_url, "kms_key_arn": route.source.kms_key_arn},
        "destinations": [{"account": d.account or account, "region": d.region or route.source.region or region, "bucket": d.bucket,
                          "endpoint_url": d.endpoint_url, "rule_id": d.rule_id, "role_arn": d.role_arn} for d in route.destinations],
    })


def _same(a: RouteSpec, b: RouteSpec) -> bool:
    return a.model_dump(exclude={"version", "inventory", "verdict_observed"}) == b.model_dump(exclude={"version", "inventory", "verdict_observed"})


def upsert_stack_route(registry: RegistryStore, spec: RouteSpec) -> str:
    """Write the stack's route; ``"unchanged"``, ``"written"`` or ``"replaced discovered"``. Idempotent
    (a redelivered request changes nothing). A route a person registered under the same name
    (``replmon fleet put``) is never overwritten: ConfigError names RouteName."""
    if spec.managed_by != "stack" or spec.origin is not Origin.EXPLICIT:
        raise ValueError(f"upsert_stack_route: {spec.name} is not the stack's explicit route")
    for _ in range(3):  # another writer between the read and the conditional write: read again
        old = registry.get_route(spec.group, spec.name)
        if old is not None and old.origin is Origin.EXPLICIT and old.managed_by != "stack":
            raise ConfigError(f"RouteName: {spec.name!r} is an explicit route written by replmon fleet put; "
                              "choose another RouteName or delete that route (replmon fleet delete)")
        if old is not None and old.origin is Origin.EXPLICIT and _same(old.model_copy(update={"version": 0}), spec):
            return "unchanged"
        replaced = old is not None and old.origin is Origin.DISCOVERED
        if replaced:
            registry.delete_route(spec.group, spec.name, origin=Origin.DISCOVERED.value)
        if registry.put_explicit(spec, old.version if old is not None and old.origin is Origin.EXPLICIT else None):
            return "replaced discovered" if replaced else "written"
    raise ConfigError(f"RouteName: {spec.name!r} kept changing while the stack wrote it; retry the deployment")


def delete_stack_route(registry: RegistryStore, name: str) -> list[str]:
    """Remove the stack's route ``name`` from every group it may be in (RouteGroups may have changed
    since it was written); never a route a person or the inventory wrote. The groups it was deleted from."""
    out = []
    for group in group_names(MAX_ROUTE_GROUPS):
        old = registry.get_route(group, name)
        if old is not None and old.managed_by == "stack" and registry.delete_route(group, name, origin=Origin.EXPLICIT.value):
            out.append(group)
    return out


# ------------------------------------------------------------------------------ the custom resource
def is_custom_resource(event: Mapping[str, Any]) -> bool:
    return isinstance(event, Mapping) and "RequestType" in event and "ResponseURL" in event and "ResourceProperties" in event


def _put_response(url: str, body: dict[str, Any]) -> None:
    """CloudFormation waits for this PUT to the request's pre-signed S3 URL (an empty Content-Type)."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(data))})
    with urllib.request.urlopen(request, timeout=30) as resp:
        resp.read()


def handle_custom_resource(event: Mapping[str, Any], registry: RegistryStore, *, groups: int,
                           respond: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Create / Update: upsert the route (physical id = its name); Delete: remove it. Always answers
    CloudFormation (a failure answered FAILED with the reason, so a stack never waits an hour)."""
    kind = str(event["RequestType"])
    props = dict(event.get("ResourceProperties") or {})
    physical = str(event.get("PhysicalResourceId") or props.get("RouteName") or "stack-route")
    status, reason, data = "SUCCESS", "", {}
    try:
        if kind in ("Create", "Update"):
            spec = stack_route_spec(props, groups=groups)
            outcome = upsert_stack_route(registry, spec)
            physical, data = spec.name, {"Route": spec.name, "Group": spec.group, "Outcome": outcome}
            log.info("stack route written", extra={"route": spec.name, "group": spec.group, "outcome": outcome})
        elif kind == "Delete":
            if physical != "stack-route":  # a Create that failed before naming the route wrote nothing
                data = {"DeletedFrom": ",".join(delete_stack_route(registry, physical))}
            log.info("stack route deleted", extra={"route": physical, **data})
        else:
            raise ValueError(f"RequestType {kind!r} is not Create, Update or Delete")
    except Exception as exc:
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
        log.error("stack route not written", extra={"request": kind, "error": reason})
    body = response(event, status, reason, physical, data)
    (respond or _put_response)(str(event["ResponseURL"]), body)
    return body


#: CloudFormation refuses a custom resource response body over 4096 bytes ("Custom resource response objects").
MAX_RESPONSE_BYTES = 4096


def response(event: Mapping[str, Any], status: str, reason: str, physical: str, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer CloudFormation reads, its Reason cut so the encoded body stays within 4096 bytes
    (measured as sent: json.dumps escapes non-ASCII, so characters are not bytes)."""
    body = {"Status": status, "Reason": reason or f"see CloudWatch Logs stream of {event.get('LogicalResourceId', 'StackRoute')}",
            "PhysicalResourceId": physical, "StackId": event.get("StackId"), "RequestId": event.get("RequestId"),
            "LogicalResourceId": event.get("LogicalResourceId"), "Data": dict(data or {})}
    while len(json.dumps(body).encode()) > MAX_RESPONSE_BYTES and body["Reason"]:
        body["Reason"] = str(body["Reason"])[: max(0, len(str(body["Reason"])) - 256)]
    return body


def answer_failed(event: Mapping[str, Any], reason: str, respond: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """FAILED, for a request that failed before :func:`handle_custom_resource` could run (the
    function's own configuration): CloudFormation rolls back now instead of waiting out its
    ServiceTimeout."""
    props = dict(event.get("ResourceProperties") or {})
    physical = str(event.get("PhysicalResourceId") or props.get("RouteName") or "stack-route")
    body = response(event, "FAILED", reason, physical)
    (respond or _put_response)(str(event["ResponseURL"]), body)
    return body
