"""The IAM side of AWS calls: which action and resource each call needs, and whether a role allows it.

Every AWS call a handler makes is recorded (:class:`CallRecorder`), mapped to the IAM actions,
resource ARNs and condition keys AWS authorizes it with (:func:`iam_requests`), and evaluated
against that function's role with a maintained policy evaluator (@cloud-copilot/iam-simulate,
tools/iam-simulate.mjs). The mapping follows AWS's documentation:

- S3: Service Authorization Reference, "Actions, resources, and condition keys for Amazon S3",
  table "API operations defined by Amazon S3"
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html);
  PutObject/CreateMultipartUpload with x-amz-tagging also need s3:PutObjectTagging; a request
  with a VersionId needs the *Version action (GetObjectVersion, DeleteObjectVersion);
  UploadPartCopy reads its source with s3:GetObject(Version); DeleteObjects needs s3:DeleteObject
  always and s3:DeleteObjectVersion for a version id (DeleteObjects API reference, "Permissions";
  MinIO enforces the same, which is how the lab found it).
- HeadObject of a missing key answers 403, not 404, unless the caller has s3:ListBucket on the
  bucket (HeadObject API reference, "Permissions"): the recorder makes moto answer the same way.
- DynamoDB, SQS, STS, CloudWatch: the action is the operation's name under the service prefix.
- STS AssumeRole: the role is the resource; an ExternalId sent is the request's ``sts:ExternalId``
  condition key, which a trust policy can require ("AWS STS condition keys", IAM User Guide,
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_iam-condition-keys.html#ck_externalid).
  Each recorded call also names the principal that made it (:attr:`Call.principal`): the role an
  earlier AssumeRole returned its credentials for, or None for the function's own role.
"""

from __future__ import annotations

import atexit
import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock
from urllib.parse import urlparse

from botocore.client import BaseClient
from botocore.exceptions import ClientError

from tests.conftest import ROOT

SIMULATOR = ROOT / "tools" / "iam-simulate.mjs"


@dataclass(frozen=True)
class IamRequest:
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass
class Call:
    function: str
    service: str
    operation: str
    params: dict[str, Any]
    region: str
    requests: list[IamRequest] = field(default_factory=list)
    #: the role whose assumed credentials signed the call (an AssumeRole's RoleArn); None: the function's own
    principal: str | None = None


def _s3_object(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def iam_requests(service: str, operation: str, params: dict[str, Any], region: str, account: str) -> list[IamRequest]:
    """The IAM (action, resource, context) each call is authorized with; unknown calls raise."""
    if service == "s3":
        b, k = params.get("Bucket", ""), params.get("Key", "")
        obj, bucket = _s3_object(b, k), f"arn:aws:s3:::{b}"
        versioned = bool(params.get("VersionId"))
        tagged = [IamRequest("s3:PutObjectTagging", obj)] if params.get("Tagging") else []
        table: dict[str, Callable[[], list[IamRequest]]] = {
            "PutObject": lambda: [IamRequest("s3:PutObject", obj), *tagged],
            "CreateMultipartUpload": lambda: [IamRequest("s3:PutObject", obj), *tagged],
            "UploadPart": lambda: [IamRequest("s3:PutObject", obj)],
            "CompleteMultipartUpload": lambda: [IamRequest("s3:PutObject", obj)],
            "AbortMultipartUpload": lambda: [IamRequest("s3:AbortMultipartUpload", obj)],
            "UploadPartCopy": lambda: [IamRequest("s3:PutObject", obj), _copy_source(params["CopySource"])],
            "HeadObject": lambda: [IamRequest("s3:GetObjectVersion" if versioned else "s3:GetObject", obj)],
            "GetObject": lambda: [IamRequest("s3:GetObjectVersion" if versioned else "s3:GetObject", obj)],
            "ListObjectsV2": lambda: [IamRequest("s3:ListBucket", bucket, (("s3:prefix", params.get("Prefix", "")),))],
            "ListObjectVersions": lambda: [IamRequest("s3:ListBucketVersions", bucket, (("s3:prefix", params.get("Prefix", "")),))],
            "ListMultipartUploads": lambda: [IamRequest("s3:ListBucketMultipartUploads", bucket)],
            # DeleteObjects API reference, "Permissions": s3:DeleteObject always, and
            # s3:DeleteObjectVersion for each key named with a version id.
            "DeleteObjects": lambda: [
                req for o in params["Delete"]["Objects"] for req in (
                    IamRequest("s3:DeleteObject", _s3_object(b, o["Key"])),
                    *([IamRequest("s3:DeleteObjectVersion", _s3_object(b, o["Key"]))] if o.get("VersionId") else []))
            ],
            "DeleteObject": lambda: [IamRequest("s3:DeleteObjectVersion" if versioned else "s3:DeleteObject", obj)],
            "GetBucketVersioning": lambda: [IamRequest("s3:GetBucketVersioning", bucket)],
            "GetBucketReplication": lambda: [IamRequest("s3:GetReplicationConfiguration", bucket)],
            # the inventory's reads (fleet/inventory.py); HeadBucket is authorized as s3:ListBucket
            "ListBuckets": lambda: [IamRequest("s3:ListAllMyBuckets", "*")],
            "HeadBucket": lambda: [IamRequest("s3:ListBucket", bucket)],
            "GetBucketTagging": lambda: [IamRequest("s3:GetBucketTagging", bucket)],
            "GetBucketEncryption": lambda: [IamRequest("s3:GetEncryptionConfiguration", bucket)],
            # replmon fleet enroll / unenroll, uninstall --fleet (service authorization reference for S3:
            # the notification configuration's Get/Put are s3:GetBucketNotification / s3:PutBucketNotification)
            "GetBucketNotificationConfiguration": lambda: [IamRequest("s3:GetBucketNotification", bucket)],
            "PutBucketNotificationConfiguration": lambda: [IamRequest("s3:PutBucketNotification", bucket)],
        }
        if operation not in table:
            raise KeyError(f"no IAM mapping for s3:{operation}; add it to tests/iam.py with its documented actions")
        return table[operation]()
    if service == "dynamodb":
        if operation == "TransactWriteItems":
            # "Permissions for Put, Update, Delete, and Get actions are governed by the permissions used for the
            # underlying PutItem, UpdateItem, DeleteItem, and GetItem operations. For the ConditionCheck action, you
            # can use the dynamodb:ConditionCheckItem permission" ("Using IAM with DynamoDB transactions",
            # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html)
            action = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}
            return sorted({IamRequest(f"dynamodb:{action[kind]}", f"arn:aws:dynamodb:{region}:{account}:table/{body['TableName']}")
                           for item in params["TransactItems"] for kind, body in item.items()}, key=lambda r: r.action)
        # Batch calls name their tables per item; the action is the call's own.
        tables = sorted(params["RequestItems"]) if "RequestItems" in params else [params["TableName"]]
        return [IamRequest(f"dynamodb:{operation}", f"arn:aws:dynamodb:{region}:{account}:table/{t}") for t in tables]
    if service == "sqs":
        name = urlparse(params["QueueUrl"]).path.rstrip("/").rsplit("/", 1)[-1]
        return [IamRequest(f"sqs:{operation}", f"arn:aws:sqs:{region}:{account}:{name}")]
    if service == "sts" and operation == "AssumeRole":  # the role's account is the resource account
        context = (("aws:ResourceAccount", params["RoleArn"].split(":")[4]),)
        if "ExternalId" in params:
            context += (("sts:ExternalId", params["ExternalId"]),)
        return [IamRequest("sts:AssumeRole", params["RoleArn"], context)]
    if service == "organizations" and operation == "ListAccounts":
        return [IamRequest("organizations:ListAccounts", "*")]
    if service == "sns" and operation == "Publish":  # the topic is the resource (SNS API permissions reference)
        return [IamRequest("sns:Publish", params["TopicArn"])]
    if service == "cloudwatch":
        return [IamRequest(f"cloudwatch:{operation}", "*")]
    if service == "stepfunctions" and operation == "DescribeExecution":  # the execution resource (list_awsstepfunctions)
        return [IamRequest("states:DescribeExecution", params["executionArn"])]
    raise KeyError(f"no IAM mapping for {service}:{operation}; add it to tests/iam.py")


def _copy_source(src: Any) -> IamRequest:
    if isinstance(src, str):
        path, _, query = src.partition("?versionId=")
        bucket, key = path.lstrip("/").split("/", 1)
        version = query
    else:
        bucket, key, version = src["Bucket"], src["Key"], src.get("VersionId")
    return IamRequest("s3:GetObjectVersion" if version else "s3:GetObject", _s3_object(bucket, key))


_EVALUATOR: subprocess.Popen[str] | None = None


def _evaluator() -> subprocess.Popen[str]:
    """One evaluator process per test process (``--serve``), started on first use, ended at exit."""
    global _EVALUATOR
    if _EVALUATOR is None or _EVALUATOR.poll() is not None:
        assert (ROOT / "node_modules" / "@cloud-copilot" / "iam-simulate").exists(), "run `make test` (npm ci installs the evaluator)"
        _EVALUATOR = subprocess.Popen(["node", str(SIMULATOR), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, cwd=ROOT)
        atexit.register(_stop_evaluator)
    return _EVALUATOR


def _stop_evaluator() -> None:
    if _EVALUATOR is not None and _EVALUATOR.poll() is None:
        assert _EVALUATOR.stdin is not None
        _EVALUATOR.stdin.close()  # the evaluator ends at end of input
        try:
            _EVALUATOR.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _EVALUATOR.kill()


def simulate(batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Evaluate requests (see tools/iam-simulate.mjs) and return results by id."""
    node = _evaluator()
    assert node.stdin is not None and node.stdout is not None
    node.stdin.write(json.dumps({"requests": batch}) + "\n")
    node.stdin.flush()
    line = node.stdout.readline()
    assert line, f"the IAM evaluator ended (exit {node.wait()})"
    answer = json.loads(line)
    assert not isinstance(answer, dict), answer.get("error")
    return {x["id"]: x for x in answer}


def evaluate(requests: list[tuple[str, IamRequest]], policies: dict[str, list[dict[str, Any]]], account: str) -> list[str]:
    """Each (function, request) against that function's identity policies; the denied ones, described.
    A request repeated (the same function, action, resource and context) is evaluated once."""
    unique = list(dict.fromkeys(requests))
    batch = []
    for i, (fn, req) in enumerate(unique):
        batch.append({"id": str(i), "principal": f"arn:aws:iam::{account}:role/{fn}Role", "action": req.action,
                      "resource": req.resource, "accountId": account, "context": dict(req.context),
                      "identityPolicies": policies[fn]})
    results = simulate(batch) if batch else {}
    verdict = {u: results[str(i)] for i, u in enumerate(unique)}
    denied = []
    for fn, req in requests:
        res = verdict[(fn, req)]
        if res["result"] != "Allowed":
            denied.append(f"{fn}: {req.action} on {req.resource} {dict(req.context) or ''} -> {res['result']} {res.get('errors') or ''}")
    return denied


class CallRecorder:
    """Records every AWS call made while a function runs (``with recorder.function("UploadProbe")``).

    ``list_allowed(function, bucket)`` says whether that function may s3:ListBucket the bucket;
    when it may not, a HeadObject of a missing key raises 403 as S3 does, not moto's 404.
    """

    def __init__(self, account: str, list_allowed: Callable[[str, str], bool] | None = None) -> None:
        self.account = account
        self.calls: list[Call] = []
        self.current: str | None = None
        self.list_allowed = list_allowed or (lambda fn, bucket: True)
        self.assumed: dict[str, str] = {}  # access key id -> the role an AssumeRole returned it for

    @contextmanager
    def function(self, name: str) -> Iterator[None]:
        previous, self.current = self.current, name
        try:
            yield
        finally:
            self.current = previous

    @contextmanager
    def recording(self) -> Iterator[CallRecorder]:
        recorder = self
        original = BaseClient._make_api_call

        def make_api_call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            fn = recorder.current
            service = client.meta.service_model.service_name
            # The local state machine's own calls are the service's, not a function's; a function's
            # DescribeExecution (BeginRouteRun asking about a lease's holder) is recorded.
            if (fn is None or getattr(client, "_replmon_untracked", False) or service == "lambda"
                    or (service == "stepfunctions" and operation != "DescribeExecution")):
                return original(client, operation, params)
            principal = recorder.principal_of(client)  # may refresh assumed credentials: that AssumeRole is recorded first
            call = Call(fn, service, operation, dict(params), client.meta.region_name or "us-east-1", principal=principal)
            call.requests = iam_requests(service, operation, params, call.region, recorder.account)
            recorder.calls.append(call)
            try:
                answer = original(client, operation, params)
                if service == "sts" and operation == "AssumeRole":
                    recorder.assumed[answer["Credentials"]["AccessKeyId"]] = params["RoleArn"]
                return answer
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code"))
                if (service == "s3" and operation in ("HeadObject", "GetObject") and code in ("404", "NoSuchKey", "NoSuchVersion")
                        and not recorder.list_allowed(fn, params["Bucket"])):
                    raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"},
                                       "ResponseMetadata": {"HTTPStatusCode": 403}}, operation) from exc
                raise

        with mock.patch.object(BaseClient, "_make_api_call", make_api_call):
            yield self

    def principal_of(self, client: BaseClient) -> str | None:
        credentials = getattr(client._request_signer, "_credentials", None)
        if credentials is None:
            return None
        return self.assumed.get(credentials.get_frozen_credentials().access_key)

    def requests(self) -> list[tuple[str, IamRequest]]:
        return [(c.function, r) for c in self.calls for r in c.requests]
