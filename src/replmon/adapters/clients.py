"""Every AWS client replmon makes is built here, with one retry and timeout policy.

The policy (for Lambda, the CLI, the lab and the mount runner alike):

- botocore's **standard** retry mode on every client: it retries throttling, transient errors
  and connection errors with jittered exponential backoff (the legacy default retries fewer
  errors; boto3 guide "Retries", https://docs.aws.amazon.com/boto3/latest/guide/retries.html);
- a **connect timeout and a read timeout** on every client, so a hung endpoint costs seconds;
- **attempts by what a call is for**: one of the :class:`CallClass` es below, each with its
  timeouts and ``total_max_attempts`` (which counts the first attempt, unlike ``max_attempts``).

The run's bounds are written against these numbers (probe/plan.py: RecordResult's and Cleanup's
bounds; probe/request.py: PollReplication's margin for its final HEADs); tests/test_clients.py
checks they still hold, and that nothing outside this module builds a client or a Config.

>>> CONTROL.config().retries
{'mode': 'standard', 'total_max_attempts': 2}
>>> STORE.attempt_seconds, STORE.worst_case_seconds
(13, 42.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

#: Standard mode's backoff: base 2, jittered, capped at 20 s (the boto3 "Retries" guide).
MAX_BACKOFF_SECONDS = 20.0


@dataclass(frozen=True)
class CallClass:
    """How long one kind of call may take: timeouts per attempt, and attempts in all."""

    name: str
    connect_timeout: float
    read_timeout: float
    attempts: int  # botocore's total_max_attempts: the first attempt included
    purpose: str
    pool: int = 10  # botocore's max_pool_connections (its default): connections kept per client

    def config(self, **extra: Any) -> Config:
        return Config(retries={"mode": "standard", "total_max_attempts": self.attempts}, connect_timeout=self.connect_timeout,
                      read_timeout=self.read_timeout, max_pool_connections=self.pool, **extra)

    @property
    def attempt_seconds(self) -> float:
        """The longest one attempt waits for an endpoint that never answers."""
        return self.connect_timeout + self.read_timeout

    @property
    def worst_case_seconds(self) -> float:
        """Every attempt timing out, with the longest backoff between them."""
        backoff = sum(min(2.0**i, MAX_BACKOFF_SECONDS) for i in range(self.attempts - 1))
        return self.attempts * self.attempt_seconds + backoff


DATA = CallClass("data", 5, 60, 4, "S3 PUT and parts: a part takes a while on a slow link")
CONTROL = CallClass("control", 3, 10, 2, "S3 HEAD, list, delete (and other control-plane reads): a hung endpoint costs "
                    "seconds, not minutes; the state machine retries the step")
STORE = CallClass("store", 3, 10, 3, "DynamoDB, the SQS spool and event queue, CloudWatch reads, GetBucketReplication: "
                  "a store that does not answer costs seconds, then the record is spooled; the collector's 16 threads "
                  "share its client", pool=20)
READ = CallClass("read", 3, 5, 2, "reading the store for a person (reports): a dead store is reported in ~10 s")
PREFLIGHT = CallClass("preflight", 3, 5, 1, "`replmon probe` checks every bucket and the store before it writes anything")
RESULTS = CallClass("results", 3, 20, 3, "IngestFioResults reading a run's result files; the lab's own setup and checks")
UPLOADS = CallClass("uploads", 5, 60, 5, "the fio runner's uploads to the results bucket (the run is lost if they fail)")
HEARTBEAT = CallClass("heartbeat", 2, 5, 2, "the Heartbeat's PUTs, HEADs and deletes: a hung endpoint must not hold the "
                      "group's one-minute invocation (a 1 KiB PUT needs no minute); 32 threads share each client", pool=40)
#: Every call class: the policy, in one table (docs/ARCHITECTURE.md prints it).
POLICY: Mapping[str, CallClass] = {c.name: c for c in (DATA, CONTROL, STORE, READ, PREFLIGHT, RESULTS, UPLOADS, HEARTBEAT)}

_PATH_STYLE = Config(s3={"addressing_style": "path"})


def session(keys: tuple[str, str] | None = None, profile: str | None = None) -> boto3.session.Session:
    """Explicit keys (S3-compatible servers such as MinIO), else the standard chain (Lambda's role,
    a profile, the environment)."""
    return boto3.session.Session(*keys) if keys else boto3.session.Session(profile_name=profile)


def credentials_session(credentials: Mapping[str, str]) -> boto3.session.Session:
    """A session on temporary credentials (an AssumeRole answer's AccessKeyId, SecretAccessKey, SessionToken)."""
    return boto3.session.Session(aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["SecretAccessKey"],
                                 aws_session_token=credentials["SessionToken"])


def assume_role_params(role_arn: str, external_id: str | None = None, session_name: str = "replmon") -> dict[str, str]:
    """The one AssumeRole request replmon makes: every member role, the inventory's and the probes'
    and the collector's, is assumed with the deployment's ExternalId when one is configured
    (MemberExternalId; the member roles' trust requires ``sts:ExternalId``, AssumeRole API reference).

    >>> assume_role_params("arn:aws:iam::111122223333:role/replmon-prober", "ext-1")
    {'RoleArn': 'arn:aws:iam::111122223333:role/replmon-prober', 'RoleSessionName': 'replmon', 'ExternalId': 'ext-1'}
    >>> "ExternalId" in assume_role_params("arn:aws:iam::111122223333:role/replmon-reader", "")
    False
    """
    params = {"RoleArn": role_arn, "RoleSessionName": session_name}
    if external_id:
        params["ExternalId"] = external_id
    return params


def assume_role(sts: Any, role_arn: str, external_id: str | None = None, session_name: str = "replmon") -> dict[str, str]:
    """One AssumeRole now, through ``sts`` (a client of this module's): the answer's three keys
    (for :func:`credentials_session`). Callers that must know at once whether a role admits them
    (the inventory names a refusal per account) use this; long-lived clients use ``role_arn``."""
    creds = sts.assume_role(**assume_role_params(role_arn, external_id, session_name))["Credentials"]
    return {k: creds[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")}


def _assumed_role_session(base: boto3.session.Session, role_arn: str, region: str | None,
                          external_id: str | None = None) -> boto3.session.Session:
    """A session whose credentials re-assume ``role_arn`` (with ``external_id``) before they expire
    (Lambda containers outlive the 1-hour default), the way botocore does for profiles with role_arn."""
    def sts(service: str, **kwargs: Any) -> Any:  # botocore builds its STS client bare: give it the policy
        return base._session.create_client(service, config=CONTROL.config(), **kwargs)

    extra = assume_role_params(role_arn, external_id)
    del extra["RoleArn"]  # the fetcher adds it
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=sts,
        source_credentials=base.get_credentials(),
        role_arn=role_arn,
        extra_args=extra,
    )
    core = botocore.session.Session()
    core._credentials = DeferredRefreshableCredentials(method="assume-role", refresh_using=fetcher.fetch_credentials)  # type: ignore[attr-defined]
    return boto3.session.Session(botocore_session=core, region_name=region)


def client(service: str, call: CallClass, *, region: str | None = None, endpoint_url: str | None = None,
           keys: tuple[str, str] | None = None, profile: str | None = None, role_arn: str | None = None,
           external_id: str | None = None, base: boto3.session.Session | None = None) -> Any:
    """A boto3 client for ``service`` under the policy's ``call`` class.

    ``endpoint_url`` points at an S3-compatible server or DynamoDB Local (then the region defaults
    to us-east-1, and S3 uses path-style addresses); ``role_arn`` is assumed (with ``external_id``,
    :func:`assume_role_params`) for another account's buckets or metrics; ``base`` is a session to
    build from (else one from ``keys`` or ``profile``).
    """
    s = base or session(keys, profile)
    if role_arn:  # another account's buckets or metrics: through a role there
        s = _assumed_role_session(s, role_arn, region, external_id)
    config = call.config()
    if service == "s3" and endpoint_url:
        config = config.merge(_PATH_STYLE)
    return s.client(service, region_name=region or ("us-east-1" if endpoint_url else None), endpoint_url=endpoint_url,  # type: ignore[call-overload]
                    config=config)


def dynamodb(call: CallClass = STORE, *, endpoint_url: str | None = None, region: str | None = None,
             keys: tuple[str, str] | None = None, profile: str | None = None) -> Any:
    """A DynamoDB client; DynamoDB Local checks no signature, but boto3 needs *some* key: without
    credentials from the chain, a local endpoint gets placeholder keys."""
    s = session(keys, profile)
    if endpoint_url and s.get_credentials() is None:
        s = boto3.session.Session("local", "local")
    return client("dynamodb", call, region=region, endpoint_url=endpoint_url, base=s)


@cache
def cached(service: str, call: CallClass, region: str | None = None, endpoint_url: str | None = None,
           keys: tuple[str, str] | None = None, profile: str | None = None, role_arn: str | None = None,
           external_id: str | None = None) -> Any:
    """One client per argument set and execution environment: clients are costly to build."""
    return client(service, call, region=region, endpoint_url=endpoint_url, keys=keys, profile=profile, role_arn=role_arn,
                  external_id=external_id)

