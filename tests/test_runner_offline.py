"""The local runner emulates only Step Functions and Lambda: S3, DynamoDB, STS, SQS and
CloudWatch calls go to the real endpoint, whatever the order in which clients are created.

Checked without any network (a network namespace with no interface up): a client for a default
AWS endpoint must fail to connect (moto did not answer it), while the emulated Step Functions
still answers. Nothing can leave the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = r"""
import json
import boto3
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

once = Config(retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=2)
early = {"s3": boto3.client("s3", region_name="us-east-1", config=once)}  # before moto is imported

from replmon.adapters.metrics import NullMetrics
from replmon.local.aslrun import local_state_machine
from replmon.wiring import Deps

deps = Deps(stores=lambda e: None, store=None, metrics=NullMetrics())
out = {}
with local_state_machine(deps) as sm:
    # A session made now carries moto's hook (a session takes botocore's handlers when it is made).
    fresh = boto3.session.Session()
    late = {svc: fresh.client(svc, region_name="us-east-1", config=once) for svc in ("s3", "dynamodb", "sts", "sqs", "cloudwatch")}
    default = boto3.client("dynamodb", region_name="us-east-1", config=once)
    calls = {
        "s3 (client made before moto loaded)": lambda: early["s3"].list_buckets(),
        "dynamodb (default session)": lambda: default.list_tables(),
        "s3": lambda: late["s3"].list_buckets(),
        "dynamodb": lambda: late["dynamodb"].list_tables(),
        "sts": lambda: late["sts"].get_caller_identity(),
        "sqs": lambda: late["sqs"].list_queues(),
        "cloudwatch": lambda: late["cloudwatch"].list_metrics(),
    }
    for name, call in calls.items():
        try:
            call()
            out[name] = "answered"
        except EndpointConnectionError:
            out[name] = "connection error"
        except Exception as exc:
            out[name] = type(exc).__name__
    out["stepfunctions (emulated)"] = len(sm.sfn.list_state_machines()["stateMachines"])
print(json.dumps(out))
"""


def netns() -> list[str]:
    if not shutil.which("unshare"):
        pytest.fail("unshare (util-linux) is needed to run this check without a network")
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def test_only_step_functions_and_lambda_are_emulated() -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}
    r = subprocess.run([*netns(), sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.pop("stepfunctions (emulated)") == 1  # moto answered, offline
    assert out == {k: "connection error" for k in out}, out
