"""`replmon preflight`: is an existing route ready to be probed? Read-only (fleet/preflight.py
judges; this module reads S3, IAM and the stack's outputs, and never writes)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from replmon.cli.common import INFRASTRUCTURE, aws_region_or_fail, check_url, fail, keys_from_env
from replmon.cli.exitcodes import Exit, combine
from replmon.cli.render import FORMAT_HELP, Format, emit, out
from replmon.core.defaults import DEFAULTS

#: S3's error codes for "this bucket has none of that configuration": a state, not a failure.
NOT_CONFIGURED = {"ReplicationConfigurationNotFoundError", "ServerSideEncryptionConfigurationNotFoundError"}


def _read(call: Any, **kwargs: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(answer, None), (None, None) when S3 says the configuration does not exist, or (None, error)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from replmon.adapters.explain import explain

    try:
        return call(**kwargs), None
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in NOT_CONFIGURED:
            return None, None
        return None, explain(exc)
    except BotoCoreError as exc:
        return None, explain(exc)


def _role(iam: Any, role_arn: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str | None]:
    """The role's trust policy and identity policies (inline and attached), or the error."""
    from replmon.fleet.preflight import policy_document

    name = role_arn.rsplit("/", 1)[-1]
    role, error = _read(iam.get_role, RoleName=name)
    if role is None:
        return None, [], error or "no such role"
    policies = []
    for page in iam.get_paginator("list_role_policies").paginate(RoleName=name):
        for p in page["PolicyNames"]:
            policies.append(policy_document(iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"]))
    for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name):
        for a in page["AttachedPolicies"]:
            version = iam.get_policy(PolicyArn=a["PolicyArn"])["Policy"]["DefaultVersionId"]
            doc = iam.get_policy_version(PolicyArn=a["PolicyArn"], VersionId=version)["PolicyVersion"]["Document"]
            policies.append(policy_document(doc))
    return policy_document(role["Role"]["AssumeRolePolicyDocument"]), policies, None


def preflight(
    source_bucket: Annotated[str, typer.Option(metavar="BUCKET", help="The route's source bucket.")],
    dest_bucket: Annotated[list[str] | None, typer.Option(metavar="BUCKET", help="A destination bucket (repeat; default: every "
                                                          "destination of the rules that cover the probe prefix).")] = None,
    prefix: Annotated[str, typer.Option(metavar="PREFIX", help="The probe prefix (ProbePrefix).")] = DEFAULTS.probe_prefix,
    events_target: Annotated[str | None, typer.Option(metavar="ARN", help="replmon's events queue (the stack's output "
                                                      "EventsQueueArn): check the source sends to it.")] = None,
    source_region: Annotated[str | None, typer.Option(envvar="AWS_REGION", metavar="REGION", help="The source bucket's AWS Region.")] = None,
    dest_region: Annotated[str | None, typer.Option(metavar="REGION", help="The destinations' AWS Region, if it differs.")] = None,
    source_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_SOURCE_ENDPOINT", metavar="URL",
                                                        help="An S3-compatible URL (e.g. the lab's MinIO); omit for AWS.")] = None,
    dest_endpoint: Annotated[str | None, typer.Option(envvar="REPLMON_DEST_ENDPOINT", metavar="URL",
                                                      help="An S3-compatible URL; omit for AWS.")] = None,
    profile: Annotated[str | None, typer.Option(envvar="AWS_PROFILE", metavar="PROFILE",
                                                help="AWS profile (else the default credential chain).")] = None,
    fmt: Annotated[Format, typer.Option("--format", help=FORMAT_HELP)] = Format.table,
) -> int:
    """Check an existing route before deploying: read-only.

    Versioning on both sides, the replication rule that covers the probe prefix, RTC and metrics
    on it, the source's replication events (and conflicts with entries already there), default
    encryption against the rule's SSE-KMS settings, and the replication role (S3 may assume it;
    its policies allow replicating the probe prefix). Every failure prints its fix, and the exact
    document to apply where there is one. Reads with the default AWS credential chain or
    --profile; S3-compatible endpoints read REPLMON_ACCESS_KEY_ID / REPLMON_SECRET_ACCESS_KEY.
    """
    from replmon.adapters import clients
    from replmon.core.route import Endpoint
    from replmon.fleet import preflight as pf
    from replmon.fleet.discovery import discover

    check_url(source_endpoint, "--source-endpoint")
    check_url(dest_endpoint, "--dest-endpoint")
    aws_region_or_fail(source_region, source_endpoint, "--source-region", profile)
    keys = keys_from_env("REPLMON_")
    src = clients.client("s3", clients.PREFLIGHT, region=source_region, endpoint_url=source_endpoint,
                         keys=keys if source_endpoint else None, profile=profile)
    report = pf.Preflight()
    answer, error = _read(src.get_bucket_versioning, Bucket=source_bucket)
    if error and ("NoSuchBucket" in error or "could not connect" in error.lower()):
        fail(f"--source-bucket {source_bucket}: {error}", INFRASTRUCTURE)
    report.checks.append(pf.versioning("source", source_bucket, answer, error))

    repl, error = _read(src.get_bucket_replication, Bucket=source_bucket)
    config = (repl or {}).get("ReplicationConfiguration")
    if error:
        report.checks.append(pf.Check("replication configuration", pf.UNKNOWN, f"{source_bucket}: GetBucketReplication: {error}",
                                      "grant s3:GetReplicationConfiguration to the caller"))
        found = None
    else:
        found = discover(source_bucket, config, prefix, source=Endpoint(bucket=source_bucket)) if config else None
        report.checks += pf.replication(source_bucket, config, found, dest_bucket, prefix, s3_compatible=source_endpoint is not None)
    chosen = [r for r in (found.rules if found else []) if r.chosen]
    dests = list(dest_bucket or dict.fromkeys(r.destination_bucket for r in chosen))

    dst = clients.client("s3", clients.PREFLIGHT, region=dest_region or source_region, endpoint_url=dest_endpoint or source_endpoint,
                         keys=keys if (dest_endpoint or source_endpoint) else None, profile=profile)
    for d in dests:
        answer, error = _read(dst.get_bucket_versioning, Bucket=d)
        report.checks.append(pf.versioning("destination", d, answer, error))

    answer, error = _read(src.get_bucket_notification_configuration, Bucket=source_bucket)
    report.checks.append(pf.notifications(source_bucket, answer, events_target, error, probe_prefix=prefix))
    answer, error = _read(src.get_bucket_encryption, Bucket=source_bucket)
    report.checks.append(pf.encryption(source_bucket, answer, config, chosen, error))

    role_arn = (config or {}).get("Role")
    if source_endpoint:  # MinIO and other S3-compatible servers replicate with their own remote-target credentials, not an IAM role
        report.checks.append(pf.Check("replication role", pf.NOT_APPLICABLE,
                                      f"{source_endpoint} is an S3-compatible endpoint: there is no IAM to read"
                                      + (f" (the configuration names {role_arn})" if role_arn else "")
                                      + "; the server replicates with its own remote-target credentials",
                                      "check those credentials on the server (MinIO: mc replicate ls / mc admin bucket remote ls)"))
    elif config is not None and not role_arn:
        report.checks.append(pf.Check("replication role", pf.NOT_APPLICABLE, f"{source_bucket}: the replication configuration names "
                                      "no role, so there is no role to check (S3 itself requires one on AWS)"))
    elif role_arn:
        iam = clients.client("iam", clients.PREFLIGHT, region=source_region, profile=profile)
        trust, policies, error = _role(iam, role_arn)
        report.checks += pf.replication_role(role_arn, trust, policies, source_bucket, dests, prefix, error)

    rows = [c.to_json() for c in report.checks]
    # not_applicable never changes the code: it is neither a pass nor a failure
    code = combine([Exit.BREACH if c.verdict == pf.FAIL else Exit.INFRASTRUCTURE if c.verdict == pf.UNKNOWN else Exit.OK
                    for c in report.checks])
    headline = (f"{source_bucket}: ready to probe {prefix!r}" if report.ready else
                f"{source_bucket}: NOT ready - {report.count(pf.FAIL)} failed, {report.count(pf.UNKNOWN)} not readable") + \
        f" ({report.count(pf.PASS)} passed, {report.count(pf.WARN)} warnings" + \
        (f", {report.count(pf.NOT_APPLICABLE)} not applicable" if report.count(pf.NOT_APPLICABLE) else "") + "; nothing was changed)"
    # a table of four prose columns is cut at 100 columns: the fixes follow it, one line each
    emit(rows, fmt, headline, columns=["check", "verdict", "detail"] if fmt is Format.table else ["check", "verdict", "detail", "fix"],
         document={"source_bucket": source_bucket, "probe_prefix": prefix, "ready": report.ready, "checks": rows})
    if fmt is Format.table:
        for c in report.checks:
            if c.fix:
                out.print(f"fix ({c.name}): {c.fix}", highlight=False, markup=False)
        for c in report.checks:
            if c.document is not None:
                out.print(f"\n{c.name}: apply this document\n{json.dumps(c.document, indent=1)}", highlight=False, markup=False)
    return code
