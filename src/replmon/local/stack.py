"""The stack as deployed, run offline: every function through its handler, with the environment
and the IAM role template.yaml gives it, every AWS call decided by an IAM policy evaluator, the
schedules stepped on a clock; one hub account, two member accounts, two Regions, all in moto.

What is real and what is emulated:

- **Real**: the handlers (``replmon.entry``, loaded as each function's ``Handler`` names them), the
  composition root (``wiring.from_env`` on the function's resolved environment: the very clients,
  stores and settings Lambda builds), the state machine (``statemachines/*.asl.json`` under moto's
  interpreter, :mod:`replmon.local.aslrun`), the roles (each function's ``Policies`` in template.yaml,
  the member roles of templates/member-account.yaml, their trust policies), the schedules
  (every ``ScheduleV2`` event of template.yaml: its rate, state and input), the fleet alarms
  (template.yaml's Metrics Insights alarms, evaluated by :mod:`replmon.local.insights` over the EMF
  the handlers print).
- **Emulated**: AWS itself (moto: S3, DynamoDB, SQS, SNS, STS, CloudWatch, Step Functions;
  multi-account by credentials: each principal's calls land in its own account); S3 replication
  (moto never replicates: a source object under a rule reports PENDING, then COMPLETED and its
  replica appears in the destination account and Region, or FAILED, or stays PENDING, as the
  scenario sets each pair; S3's replication metrics are put in CloudWatch where S3 publishes them);
  IAM (a call a role does not allow raises AccessDenied to the code, as AWS would; an AssumeRole
  needs the caller's identity policy and the role's trust policy, ``sts:ExternalId`` included);
  Lambda's runtime (each function its own environment, stdout and clients: ``os.environ`` and
  ``sys.stdout`` are per thread while the stack runs, handed on to a handler's pool threads).
- **Time**: one :class:`SteppedClock`. The thread that entered the stack (the driver: a test, a
  bench) steps it to each due schedule; every other thread's sleep (a Wait state, a retry's
  backoff, a handler polling) runs up to that time and parks there, so executions run beside the
  schedules: a heartbeat and the alarms keep their minute while a probe polls a stalled route. A
  step that hangs (:meth:`DeployedStack.hang`) is left hanging. Between two states an execution is
  visible to no counter: the driver takes it as waiting once nothing changed for
  :data:`QUIET_SECONDS` of real time.

The IAM evaluator and the mapping of an API call to its IAM actions are passed in
(:class:`Authorizer`: the tests use tests/iam.py, the policy evaluator @cloud-copilot/iam-simulate).

A scenario (tests/deployed/ has them all; docs/DEPLOYED.md)::

    with DeployedStack(authorizer) as stack:
        pair = stack.bucket_pair(MEMBER_A, "orders", HOME, MEMBER_A, "orders-dr", AWAY, tags={"replmon:enroll": "true"})
        stack.invoke("Inventory", {})                 # or wait for its schedule
        stack.advance(minutes=6)                      # a probe run, heartbeats, the collector, the alarms
        stack.points("ReplicationLatencySeconds", Route="orders")   # what CloudWatch holds (EMF)
        stack.stall(pair.source)                      # replication of the pair stops
        stack.advance(minutes=2)
        stack.pages(naming="orders")                  # page-topic messages naming it (FleetPages rules)
        stack.alarm_state("RouteStalledG00Alarm", "orders")          # "ALARM"
        with stack.operator():                        # the hub's operator: `replmon report --fleet` ...
            ...

Not emulated: CloudWatch's standard (non-Insights) alarms, Lambda's concurrency and timeouts, S3 event
delivery latency (:meth:`DeployedStack.s3_event` hands an event to IngestEvents as Lambda's SQS poller
would), KMS.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from unittest import mock

from replmon import wiring
from replmon.core.clock import ManualClock
from replmon.entry import FUNCTIONS as ENTRY_MODULES
from replmon.entry import MOUNT_FUNCTIONS
from replmon.local.aslrun import LambdaContext, LocalStateMachine, load_handler
from replmon.local.cfn import Resolver, function_statements
from replmon.local.insights import AlarmEvaluator, Point, points_from_emf
from replmon.local.template import TEMPLATE, load_template

#: The accounts and Regions of the deployment: the hub (moto's default account: the local state
#: machine lives there) and two members; the hub's Region and another.
HUB, MEMBER_A, MEMBER_B = "123456789012", "444455556666", "777788889999"
HOME, AWAY = "us-east-1", "us-west-2"
STACK = "replmon"
TABLE = "replmon-latency"
#: Every function of template.yaml (the mount baselines' are another template's).
FUNCTIONS = tuple(f for f in ENTRY_MODULES if f not in MOUNT_FUNCTIONS)
MEMBER_TEMPLATE = Path(__file__).resolve().parents[3] / "templates" / "member-account.yaml"
#: The deployment the harness runs unless a scenario overrides a parameter: probe runs and the
#: collector every 5 minutes (the template's fixed rate), 1 KiB probes, the two members listed.
PARAMETERS: dict[str, Any] = {
    "ScheduleRateMinutes": 5, "MemberAccounts": [MEMBER_A, MEMBER_B],
    "ExpertSettings": json.dumps({"probe_sizes": "1KiB", "probe_classes": "1KiB@5m", "spread_seconds": 0, "probe_timeout_seconds": 900}),
}
#: Real seconds an execution must show no change before the driver takes it as waiting (between two
#: states it is visible to no counter: moto's interpreter is running it).
QUIET_SECONDS = 0.15
#: ... and when some execution has no thread waiting at all (it is between states, e.g. starting a Map run).
UNSEEN_SECONDS = 0.6
#: The alarms' evaluation, stepped as a schedule.
ALARMS = "CloudWatch alarms"
_EMF = re.compile(r'^\{.*"_aws".*\}$')


class Authorizer(Protocol):
    """The IAM side: ``requests`` maps one API call to the (action, resource, context) AWS authorizes it
    with (objects with ``action``, ``resource``, ``context`` as (key, value) pairs); ``simulate``
    evaluates a batch of requests (tools/iam-simulate.mjs's format) and answers by id."""

    def requests(self, service: str, operation: str, params: dict[str, Any], region: str, account: str) -> list[Any]: ...

    def simulate(self, batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]: ...


# ------------------------------------------------------------------------------------------ records
@dataclass
class Call:
    """One AWS call a function made, with the principal that signed it and IAM's answer."""

    function: str
    principal: str  # the role ARN whose credentials signed it
    service: str
    operation: str
    params: dict[str, Any]
    region: str
    at: float
    denied: list[str] = field(default_factory=list)  # "action on resource" IAM refused (empty: allowed)


@dataclass
class TopicMessage:
    """A message on one of the stack's SNS topics: a function's Publish, or an alarm's (per contributor)."""

    topic: str  # "page" | "ticket" | the topic ARN when it is neither
    source: str  # the function, or "alarm:<logical id>"
    subject: str  # empty for what an EventBridge rule forwards (SNS has no subject for it)
    message: str
    at: float
    state: str = ""  # an alarm contributor's new state (ALARM, OK); empty for a function's Publish

    def names(self, route: str) -> bool:
        return route in self.message or route in self.subject


@dataclass
class HandlerRun:
    function: str
    event: Any
    at: float
    result: Any = None
    error: str | None = None
    ended: float | None = None  # the stack clock when the handler returned (its billed duration: local/costcount.py)


@dataclass
class Replication:
    """How S3 replicates one source bucket's rule: ``latency`` seconds after the PUT (None: never,
    the object stays PENDING), then ``outcome`` (COMPLETED or FAILED)."""

    source: str
    source_account: str
    source_region: str
    destination: str
    destination_account: str
    destination_region: str
    rule_id: str
    prefix: str
    latency: float | None = 4.0
    outcome: str = "COMPLETED"


@dataclass
class Pair:
    source: str
    destination: str
    account: str
    region: str
    destination_account: str
    destination_region: str
    rule_id: str


@dataclass
class Schedule:
    """One EventBridge Scheduler schedule of template.yaml: its target, rate and input."""

    name: str  # <Resource>.<Event>
    target: str  # a function name, or "ProbeStateMachine"
    every: float  # seconds
    input: Any
    enabled: bool
    next: float = 0.0


def _resource_class(resource: str) -> str:
    """The verdict cache's key for a resource: an S3 object by its bucket and the first segment of its
    key (``replmon-probes/``, ``replmon-seed/``), because every role of template.yaml and
    templates/member-account.yaml grants objects by such a prefix and ``*``; anything else as it is.
    Each probe and heartbeat has a new key: the evaluator sees each kind of call once, not each call.

    >>> _resource_class("arn:aws:s3:::b/replmon-probes/20261128T190400Z-hb/r/x")
    'arn:aws:s3:::b/replmon-probes/*'
    """
    if resource.startswith("arn:aws:s3:::") and "/" in resource:
        bucket_key = resource[len("arn:aws:s3:::"):]
        bucket, _, key = bucket_key.partition("/")
        head, sep, _ = key.partition("/")
        return f"arn:aws:s3:::{bucket}/{head}{sep}*" if sep else resource
    return resource


class SteppedClock(ManualClock):
    """The deployment's one clock: it moves only when something sleeps (a handler's poll, a Wait
    state, a retry's backoff) or the driver steps it, and whatever schedule falls due on the way
    fires then, in the sleeping thread: a heartbeat and the collector run on their minute while a
    probe polls a stalled route for a quarter of an hour. (``advance`` is ``sleep``.)"""

    def __init__(self, start: float, on_time: Callable[[float], None]) -> None:
        super().__init__(start=start, tick=0.001)
        self._on_time = on_time

    def sleep(self, seconds: float) -> None:
        self._on_time(self.now() + max(0.0, seconds))

    advance = sleep

    def set(self, at: float) -> None:
        """Move to ``at`` (never back) without firing anything: the schedules' own stepping."""
        with self._lock:
            self._t = max(self._t, at)


def _rate(expression: str) -> float:
    m = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression.strip())
    if not m:
        raise ValueError(f"schedule expression {expression!r}: only rate(N minutes|hours|days) is stepped")
    return int(m.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[m.group(2).rstrip("s")]


# ------------------------------------------------------------------------------------------ the stack
class DeployedStack:
    """The deployed stack in moto; a context manager (``with DeployedStack(authorizer) as stack``).

    ``parameters`` override :data:`PARAMETERS` (template parameters); ``member_external_id`` is the
    ExternalId the member roles require (templates/member-account.yaml ``ExternalId``), and the
    hub's ``MemberExternalId`` unless ``parameters`` gives another.
    """

    def __init__(self, authorizer: Authorizer, parameters: Mapping[str, Any] | None = None, member_external_id: str = "",
                 start: float | None = None) -> None:
        self.authorizer = authorizer
        self.parameters = {**PARAMETERS, "MemberExternalId": member_external_id, **(parameters or {})}
        self.member_external_id = member_external_id
        # Two days ahead: probe keys and moto's own object times (wall clock) compare sensibly.
        self.clock = SteppedClock(start or (time.time() // 3600 + 48) * 3600, self._sleep_until)
        self.template = load_template(TEMPLATE)
        self.calls: list[Call] = []
        self.notifications: list[TopicMessage] = []
        self.invocations: list[HandlerRun] = []
        self.emf: list[tuple[str, dict[str, Any]]] = []  # (function, EMF document)
        self._points: dict[str, list[Point]] = {}  # metric -> its observations (CloudWatch's view of the EMF)
        self.logs: list[tuple[str, str]] = []  # (function, line) of what the handlers printed besides EMF
        self.replication: dict[str, list[Replication]] = {}  # source bucket -> its rules
        self.owners: dict[str, str] = {}  # bucket -> account
        self.regions: dict[str, str] = {}  # bucket -> Region
        self.schedules: list[Schedule] = []
        self.fired: list[tuple[float, str]] = []  # (time, schedule) of everything that fired
        self.alarm_states: dict[str, dict[tuple[str, ...], str]] = {}
        self._principals: dict[str, str] = {}  # access key id -> role ARN
        self._policies: dict[str, list[dict[str, Any]]] = {}  # role ARN -> identity policies
        self._trust: dict[str, dict[str, Any]] = {}  # role ARN -> trust policy
        self._verdicts: dict[Any, str] = {}
        self._ctx = threading.local()  # per thread (and handed to a handler's pool threads): function, environment, stdout
        self._driver = threading.current_thread()  # the one thread that moves the clock forward (the test's, the bench's)
        self._horizon = float("-inf")  # other threads' sleeps park here until the driver moves it
        self._time = threading.Condition()
        self._parked = 0  # threads parked at the horizon
        self._parked_handlers = 0  # ... of which handlers (a Wait state is not)
        self._active = 0  # handlers running (hung ones not counted)
        self._closing = False
        self._parked_targets: list[float] = []  # when each parked thread wants to wake
        self._settled = True  # nothing has run since the executions last waited
        self._lock = threading.Lock()  # the invocation log
        self._schedule_lock = threading.Lock()
        self._running: set[str] = set()  # schedules whose invocation has not ended (not fired again meanwhile)
        self._iam_lock = threading.Lock()
        self._hangs: dict[str, threading.Event] = {}
        self._throttled: set[str] = set()  # routes whose latency-table reads are throttled (:meth:`throttle`)
        self._hung = 0
        self._replicas: dict[tuple[str, str, str], str] = {}  # (destination, key, source version) -> replica version
        self._failed: set[tuple[str, str, str]] = set()  # objects S3 failed to replicate (counted once)
        self._put_end: dict[tuple[str, str, str], float] = {}  # (source, key, version) -> when its PUT ended
        self._executions: list[str] = []  # started and not seen ended
        self.execution_starts: dict[str, float] = {}  # every execution started -> its start (stack clock)
        self._ended = 0
        self._stack = contextlib.ExitStack()
        self._deps: dict[str, wiring.Deps] = {}
        self._client_cache: dict[Any, Any] = {}  # clients, credentials, resolved environments, the resolver

    # ------------------------------------------------------------------ set-up
    def __enter__(self) -> DeployedStack:
        from moto import mock_aws

        self._stack.enter_context(mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "harness", "AWS_SECRET_ACCESS_KEY": "harness",
                                                              "AWS_DEFAULT_REGION": HOME}))
        os.environ.pop("MOTO_ACCOUNT_ID", None)
        self._stack.enter_context(_thread_context(self._ctx))
        self._stack.enter_context(mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}))
        self._stack.enter_context(self._gate())
        from replmon.adapters import clients

        self._stack.enter_context(mock.patch.object(clients, "cached", self._cached_per_function))
        self._build_hub()
        for account in (HUB, MEMBER_A, MEMBER_B):
            self._member_roles(account)
        for name in FUNCTIONS:
            self._function_role(name)
        self.schedules = self._read_schedules()
        self.alarms = self._read_alarms()
        self.machine = LocalStateMachine({n: self._handler(n) for n in _STATE_MACHINE_FUNCTIONS}, clock=self.clock,
                                         plan_s3=self.admin("s3", HUB), name=f"{STACK}-replication-probe")
        self._stack.enter_context(self.machine)
        self._stack.enter_context(wiring.injected(_LazyDeps(self)))
        self.page_rules = self._read_contributor_rules()
        if self.resolver.exists("StackRoute"):
            self.deploy_stack_route()
        return self

    def deploy_stack_route(self, request: str = "Create") -> dict[str, Any]:
        """CloudFormation's request for the StackRoute custom resource (template.yaml: its properties,
        resolved), handed to its ServiceToken, the Inventory function; the answer CloudFormation
        reads from the pre-signed URL is returned (never sent: no traffic leaves the process)."""
        from replmon.fleet import stack_route

        answers: list[dict[str, Any]] = []
        props = self.resolver.resolve(self.template["Resources"]["StackRoute"]["Properties"])
        event = {"RequestType": request, "ResponseURL": "https://cloudformation-custom-resource-response.invalid/harness",
                 "StackId": f"arn:aws:cloudformation:{HOME}:{HUB}:stack/{STACK}/harness", "RequestId": str(uuid.uuid4()),
                 "LogicalResourceId": "StackRoute", "ResourceType": "Custom::StackRoute", "ResourceProperties": props}
        if request != "Create":
            event["PhysicalResourceId"] = str(props.get("RouteName"))
        with mock.patch.object(stack_route, "_put_response", lambda url, body: answers.append(body)):
            self.invoke("Inventory", event)
        assert answers and answers[-1]["Status"] == "SUCCESS", f"StackRoute {request} failed: {answers}"
        return answers[-1]

    def __exit__(self, *exc: object) -> None:
        for event in self._hangs.values():
            event.set()
        with self._time:
            self._closing, self._horizon = True, float("inf")
            self._time.notify_all()
        try:
            with contextlib.suppress(Exception):
                self.settle(timeout=30, until_end=True)
        finally:
            self._stack.close()

    def admin(self, service: str, account: str, region: str = HOME) -> Any:
        """A client with the account's administrator: set-up and inspection, outside IAM's gate."""
        key = ("admin", service, account, region)
        if key not in self._client_cache:
            import boto3

            sts: Any = boto3.client("sts", region_name=HOME, aws_access_key_id="harness", aws_secret_access_key="harness")
            sts._replmon_untracked = True
            creds = sts.assume_role(RoleArn=f"arn:aws:iam::{account}:role/harness-admin", RoleSessionName="harness")["Credentials"]
            session = boto3.session.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                                            aws_session_token=creds["SessionToken"], region_name=region)
            c: Any = session.client(service)  # type: ignore[call-overload]
            c._replmon_untracked = True
            self._client_cache[key] = c
        return self._client_cache[key]

    def _physical(self) -> tuple[dict[str, str], dict[str, str]]:
        q = f"https://sqs.{HOME}.amazonaws.com/{HUB}"
        physical = {"LatencyTable": TABLE, "RecordSpoolQueue": f"{q}/{STACK}-spool", "EventsQueue": f"{q}/{STACK}-events",
                    "SchedulerDeadLetterQueue": f"{q}/{STACK}-scheduler-dlq", "EventsDeadLetterQueue": f"{q}/{STACK}-events-dlq",
                    "PageTopic": f"arn:aws:sns:{HOME}:{HUB}:{STACK}-page", "TicketTopic": f"arn:aws:sns:{HOME}:{HUB}:{STACK}-ticket",
                    "PlanBucket": f"{STACK}-plans-{HUB}", "DemoSourceBucket": f"{STACK}-demo-source-{HUB}",
                    "DemoDestinationBucket": f"{STACK}-demo-replica-{HUB}"}
        attributes = {f"{q_}.{a}": v for q_ in ("RecordSpoolQueue", "EventsQueue", "SchedulerDeadLetterQueue", "EventsDeadLetterQueue")
                      for a, v in (("Arn", f"arn:aws:sqs:{HOME}:{HUB}:{physical[q_].rsplit('/', 1)[1]}"),
                                   ("QueueName", physical[q_].rsplit("/", 1)[1]))}
        return physical, attributes

    @property
    def resolver(self) -> Resolver:
        """template.yaml's intrinsics resolved for this deployment (its parameters, the resources' names)."""
        if "resolver" not in self._client_cache:
            physical, attributes = self._physical()
            self._client_cache["resolver"] = Resolver(self.template, self.parameters, physical=physical, attributes=attributes,
                                                      region=HOME, account=HUB, stack=STACK)
        return self._client_cache["resolver"]  # type: ignore[no-any-return]

    @property
    def page_topic(self) -> str:
        return str(self.resolver.ref("PageTopic"))

    @property
    def ticket_topic(self) -> str:
        return str(self.resolver.ref("TicketTopic"))

    def _build_hub(self) -> None:
        from replmon.local.tables import ensure_table

        r = self.resolver
        ensure_table(self.admin("dynamodb", HUB), TABLE)
        sqs = self.admin("sqs", HUB)
        for q in ("RecordSpoolQueue", "EventsQueue", "SchedulerDeadLetterQueue", "EventsDeadLetterQueue"):
            sqs.create_queue(QueueName=str(r.ref(q)).rsplit("/", 1)[1])
        sns = self.admin("sns", HUB)
        for t in ("PageTopic", "TicketTopic"):
            sns.create_topic(Name=str(r.ref(t)).rsplit(":", 1)[1])
        self._bucket(HUB, HOME, str(r.ref("PlanBucket")), versioned=False)
        if r.condition("CreateDemo"):
            src, dst = str(r.ref("DemoSourceBucket")), str(r.ref("DemoDestinationBucket"))
            self._bucket(HUB, HOME, dst)
            self._bucket(HUB, HOME, src)
            self._replicate(src, HUB, HOME, dst, HUB, HOME, "replmon-probes", str(r.ref("ProbePrefix")))

    def _bucket(self, account: str, region: str, name: str, versioned: bool = True, tags: Mapping[str, str] | None = None) -> None:
        s3 = self.admin("s3", account, region)
        kwargs: dict[str, Any] = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        s3.create_bucket(Bucket=name, **kwargs)
        if versioned:
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        if tags:
            s3.put_bucket_tagging(Bucket=name, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]})
        self.owners[name], self.regions[name] = account, region

    def _replicate(self, src: str, account: str, region: str, dst: str, dst_account: str, dst_region: str, rule_id: str,
                   prefix: str) -> None:
        self.admin("s3", account, region).put_bucket_replication(Bucket=src, ReplicationConfiguration={
            "Role": f"arn:aws:iam::{account}:role/s3-replication",
            "Rules": [{"ID": rule_id, "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": prefix},
                       "DeleteMarkerReplication": {"Status": "Disabled"},
                       "Destination": {"Bucket": f"arn:aws:s3:::{dst}", "Account": dst_account,
                                       "ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}},
                                       "Metrics": {"Status": "Enabled", "EventThreshold": {"Minutes": 15}}}}]})
        self.replication.setdefault(src, []).append(Replication(src, account, region, dst, dst_account, dst_region, rule_id, prefix))

    def bucket_pair(self, account: str, source: str, region: str, destination_account: str, destination: str,
                    destination_region: str, tags: Mapping[str, str] | None = None, rule_id: str = "replmon-probes",
                    prefix: str | None = None) -> Pair:
        """A versioned source bucket (tagged ``tags``) replicating ``prefix`` (the probe prefix by
        default) to a versioned destination, with RTC and replication metrics on."""
        prefix = prefix if prefix is not None else str(self.resolver.ref("ProbePrefix"))
        self._bucket(destination_account, destination_region, destination)
        self._bucket(account, region, source, tags=tags)
        self._replicate(source, account, region, destination, destination_account, destination_region, rule_id, prefix)
        return Pair(source, destination, account, region, destination_account, destination_region, rule_id)

    def bucket(self, account: str, name: str, region: str, tags: Mapping[str, str] | None = None) -> None:
        """A plain versioned bucket (no replication)."""
        self._bucket(account, region, name, tags=tags)

    # ------------------------------------------------------------------ roles
    def _member_roles(self, account: str) -> None:
        t = load_template(MEMBER_TEMPLATE)
        r = Resolver(t, {"HubAccountId": HUB, "HubStackName": STACK, "ExternalId": self.member_external_id,
                         "ProbePrefix": str(self.resolver.ref("ProbePrefix")), "SeedPrefix": str(self.template["Mappings"]["Fixed"]["Settings"]["SeedPrefix"])},
                     account=account, region=HOME)
        for res in t["Resources"].values():
            if res["Type"] != "AWS::IAM::Role":
                continue
            p = res["Properties"]
            arn = f"arn:aws:iam::{account}:role/{r.resolve(p['RoleName'])}"
            self._trust[arn] = r.resolve(p["AssumeRolePolicyDocument"])
            self._policies[arn] = [{"name": x["PolicyName"], "policy": r.resolve(x["PolicyDocument"])} for x in p["Policies"]]

    def role_arn(self, function: str) -> str:
        """The function's role, named as CloudFormation names it (``<stack>-<Function>Role-<suffix>``)."""
        return f"arn:aws:iam::{HUB}:role/{STACK}-{function}FunctionRole-HARNESS{len(function):02d}"

    def _function_role(self, function: str) -> None:
        arn = self.role_arn(function)
        statements = function_statements(self.template, function, self.resolver)
        self._policies[arn] = [{"name": f"{function}Policy", "policy": {"Version": "2012-10-17", "Statement": statements}}]

    def environment(self, function: str) -> dict[str, str]:
        """What Lambda gives the function: template.yaml's Globals and its own variables, resolved, and
        the runtime's (Region, name, the role's credentials)."""
        if ("env", function) in self._client_cache:
            return dict(self._client_cache[("env", function)])
        r = self.resolver
        env = dict(self.template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
        env.update(self.template["Resources"][f"{function}Function"]["Properties"].get("Environment", {}).get("Variables", {}))
        out = {k: str(v) for k, v in r.resolve(env).items()}
        creds = self._credentials(self.role_arn(function))
        out.update({"AWS_REGION": HOME, "AWS_DEFAULT_REGION": HOME, "AWS_LAMBDA_FUNCTION_NAME": function,
                    "AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
                    "AWS_SESSION_TOKEN": creds["SessionToken"], "POWERTOOLS_TRACE_DISABLED": "true",
                    "POWERTOOLS_LOG_LEVEL": "WARNING"})
        self._client_cache[("env", function)] = out
        return dict(out)

    def _credentials(self, role_arn: str) -> dict[str, str]:
        key = ("creds", role_arn)
        if key not in self._client_cache:
            import boto3

            sts: Any = boto3.client("sts", region_name=HOME, aws_access_key_id="harness", aws_secret_access_key="harness")
            sts._replmon_untracked = True
            creds = sts.assume_role(RoleArn=role_arn, RoleSessionName="lambda")["Credentials"]
            self._principals[creds["AccessKeyId"]] = role_arn
            self._client_cache[key] = creds
        return dict(self._client_cache[key])

    # ------------------------------------------------------------------ the IAM gate
    def _principal(self, client: Any) -> str | None:
        creds = client._request_signer._credentials
        if creds is None:
            return None
        return self._principals.get(creds.get_frozen_credentials().access_key)

    def _resource_account(self, service: str, resource: str, caller: str) -> str:
        if service == "s3" and resource.startswith("arn:aws:s3:::"):
            return self.owners.get(resource[len("arn:aws:s3:::"):].split("/", 1)[0], caller)
        parts = resource.split(":")
        return parts[4] if len(parts) > 5 and parts[4] else caller

    def _authorize(self, service: str, operation: str, params: dict[str, Any], region: str, principal: str) -> list[str]:
        """What IAM refuses of this call (empty: allowed): the principal's identity policies, and for
        AssumeRole the role's trust policy too (``sts:ExternalId`` from the request)."""
        caller = principal.split(":")[4]
        denied: list[str] = []
        checks: list[tuple[Any, Any]] = []
        pending: dict[Any, dict[str, Any]] = {}
        for req in self.authorizer.requests(service, operation, params, region, caller):
            account = self._resource_account(service, req.resource, caller)
            context = {"aws:PrincipalArn": principal, "aws:PrincipalAccount": caller, "aws:ResourceAccount": account, **dict(req.context)}
            if service == "s3":
                context["s3:ResourceAccount"] = account
            entry: dict[str, Any] = {"principal": principal, "action": req.action, "resource": req.resource, "accountId": account,
                                     "context": context, "identityPolicies": self._policies.get(principal, [])}
            if service == "sts" and operation == "AssumeRole":
                if params.get("ExternalId"):
                    context["sts:ExternalId"] = params["ExternalId"]
                if params["RoleArn"] not in self._trust:
                    denied.append(f"{req.action} on {req.resource} (no such role)")
                    continue
                entry["resourcePolicy"] = self._trust[params["RoleArn"]]
            key = (principal, req.action, _resource_class(req.resource), account, tuple(sorted(context.items())))
            checks.append((req, key))
            if key not in self._verdicts and key not in pending:
                pending[key] = {**entry, "id": str(len(pending))}
        if pending:
            with self._iam_lock:  # one evaluator process: handlers' threads (the inventory's, the Heartbeat's) take turns
                answers = self.authorizer.simulate(list(pending.values()))
            for key, entry in pending.items():
                self._verdicts[key] = answers[entry["id"]]["result"]
        denied += [f"{req.action} on {req.resource} ({self._verdicts[key]})" for req, key in checks if self._verdicts[key] != "Allowed"]
        return denied

    @contextlib.contextmanager
    def _gate(self) -> Iterator[None]:
        from botocore.client import BaseClient
        from botocore.exceptions import ClientError

        original = BaseClient._make_api_call  # type: ignore[attr-defined]
        stack = self

        def make_api_call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            service = client.meta.service_model.service_name
            if (getattr(client, "_replmon_untracked", False) or service == "lambda"
                    or (service == "stepfunctions" and operation != "DescribeExecution")):
                return original(client, operation, params)
            principal = stack._principal(client)
            if principal is None:
                raise RuntimeError(f"{service}:{operation} signed by credentials no role of the deployment holds")
            region = client.meta.region_name or HOME
            call = Call(stack._current or "?", principal, service, operation, dict(params), region, stack.clock.now())
            stack.calls.append(call)
            if not (service == "sts" and operation == "GetCallerIdentity") and not principal.endswith(":role/harness-admin"):
                call.denied = stack._authorize(service, operation, params, region, principal)
            if call.denied:
                code = {"dynamodb": "AccessDeniedException", "sns": "AuthorizationError"}.get(service, "AccessDenied")
                status = 400 if service in ("dynamodb", "sns") else 403
                if service == "s3" and operation == "HeadObject":
                    code = "403"  # a HEAD's error has no body: botocore names it by its status
                session = f"arn:aws:sts::{principal.split(':')[4]}:assumed-role/{principal.rsplit('/', 1)[1]}/session"
                answer: Any = {"Error": {"Code": code, "Message": f"User: {session} is not authorized to perform: {'; '.join(call.denied)}"},
                               "ResponseMetadata": {"HTTPStatusCode": status}}
                raise ClientError(answer, operation)
            if service == "dynamodb" and stack._throttled and operation in ("Query", "GetItem") and stack._throttled_read(params):
                throttled: Any = {"Error": {"Code": "ProvisionedThroughputExceededException",
                                            "Message": "The level of configured provisioned throughput for the table was exceeded"},
                                  "ResponseMetadata": {"HTTPStatusCode": 400}}
                raise ClientError(throttled, operation)
            if service == "dynamodb" and stack._throttled and operation == "BatchGetItem":
                return stack._batch_get_throttled(client, original, params)
            params = stack._before_s3(service, operation, params)
            try:
                response = original(client, operation, params)
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code"))
                if (service == "s3" and operation in ("HeadObject", "GetObject") and code in ("404", "NoSuchKey", "NoSuchVersion")
                        and stack._authorize("s3", "ListObjectsV2", {"Bucket": params["Bucket"]}, region, principal)):
                    # Without s3:ListBucket, S3 answers a missing key with 403 (HeadObject API reference).
                    forbidden: Any = {"Error": {"Code": "403" if operation == "HeadObject" else "AccessDenied", "Message": "Forbidden"},
                                      "ResponseMetadata": {"HTTPStatusCode": 403}}
                    raise ClientError(forbidden, operation) from exc
                raise
            if service == "sts" and operation == "AssumeRole":
                stack._principals[response["Credentials"]["AccessKeyId"]] = params["RoleArn"]
            if service == "sns" and operation == "Publish":
                stack._published(call, params)
            return stack._after_s3(service, operation, params, response)

        with mock.patch.object(BaseClient, "_make_api_call", make_api_call):
            yield

    def _published(self, call: Call, params: dict[str, Any]) -> None:
        self.notifications.append(TopicMessage(self._topic(params.get("TopicArn", "")), call.function, str(params.get("Subject", "")), str(params.get("Message", "")),
                                               self.clock.now()))

    # ------------------------------------------------------------------ S3 replication (moto never replicates)
    def _rule(self, bucket: str, key: str) -> Replication | None:
        return next((r for r in self.replication.get(bucket, []) if key.startswith(r.prefix)), None)

    def _destination(self, bucket: str) -> bool:
        return any(r.destination == bucket for rules in self.replication.values() for r in rules)

    def _before_s3(self, service: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """A replica keeps its source's version id in S3 (moto gives it its own): calls naming the
        source's version id on a destination reach the replica."""
        if service != "s3" or not self._destination(params.get("Bucket", "")):
            return params
        bucket = params["Bucket"]
        params = dict(params)
        if params.get("VersionId"):
            params["VersionId"] = self._replicas.get((bucket, params["Key"], params["VersionId"]), params["VersionId"])
        if operation == "DeleteObjects":
            objects = [{**o, "VersionId": self._replicas.get((bucket, o["Key"], o.get("VersionId", "")), o.get("VersionId"))}
                       if o.get("VersionId") else o for o in params["Delete"]["Objects"]]
            params["Delete"] = {**params["Delete"], "Objects": objects}
        return params

    def _after_s3(self, service: str, operation: str, params: dict[str, Any], response: Any) -> Any:
        if service != "s3":
            return response
        bucket, key = params.get("Bucket", ""), params.get("Key", "")
        if operation in ("PutObject", "CompleteMultipartUpload") and self._rule(bucket, key):
            self._put_end[(bucket, key, response.get("VersionId", ""))] = self.clock.now()
        elif operation == "HeadObject":
            rule = self._rule(bucket, key)
            version = response.get("VersionId", "")
            if rule and (bucket, key, version) in self._put_end:
                response["ReplicationStatus"] = self._status(rule, key, version, response)
            elif self._destination(bucket):
                source = {v: k for k, v in self._replicas.items() if k[0] == bucket and k[1] == key}.get(version)
                if source is not None:
                    response["ReplicationStatus"] = "REPLICA"
                    response["VersionId"] = source[2]
        elif operation == "ListObjectVersions" and self._destination(bucket):
            back = {v: k[2] for k, v in self._replicas.items() if k[0] == bucket}
            for v in response.get("Versions", []):
                v["VersionId"] = back.get(v["VersionId"], v["VersionId"])
        return response

    def _status(self, rule: Replication, key: str, version: str, head: Mapping[str, Any]) -> str:
        elapsed = self.clock.now() - self._put_end[(rule.source, key, version)]
        if rule.latency is None or elapsed < rule.latency:
            return "PENDING"
        if rule.outcome == "COMPLETED" and (rule.destination, key, version) not in self._replicas:
            src = self.admin("s3", rule.source_account, rule.source_region)
            body = src.get_object(Bucket=rule.source, Key=key, VersionId=version)
            extra = {k: body[k] for k in ("Metadata", "ContentType") if body.get(k)}
            put = self.admin("s3", rule.destination_account, rule.destination_region).put_object(
                Bucket=rule.destination, Key=key, Body=body["Body"].read(), ChecksumAlgorithm="CRC64NVME", **extra)
            self._replicas[(rule.destination, key, version)] = put["VersionId"]
            self._metric(rule, latency=elapsed)
        elif rule.outcome == "FAILED" and (rule.source, key, version) not in self._failed:
            self._failed.add((rule.source, key, version))
            self._metric(rule, failed=True)
        return rule.outcome

    def _metric(self, rule: Replication, latency: float | None = None, failed: bool = False) -> None:
        """S3's replication metrics (AWS/S3, per source bucket, destination and rule) in the source's
        account, each in the Region S3 publishes it (signals/rtc.py METRIC_REGION, "Using S3
        Replication metrics"): latency and pending in the destination's, failures in the source's."""
        from datetime import UTC, datetime

        dims = [{"Name": "SourceBucket", "Value": rule.source}, {"Name": "DestinationBucket", "Value": rule.destination},
                {"Name": "RuleId", "Value": rule.rule_id}]
        at = datetime.fromtimestamp(self.clock.now(), UTC)
        if failed:
            data, region = [{"MetricName": "OperationsFailedReplication", "Dimensions": dims, "Value": 1.0, "Unit": "Count",
                             "Timestamp": at}], rule.source_region
        else:
            data, region = [{"MetricName": "ReplicationLatency", "Dimensions": dims, "Value": latency or 0.0, "Unit": "Seconds",
                             "Timestamp": at},
                            {"MetricName": "BytesPendingReplication", "Dimensions": dims, "Value": 0.0, "Unit": "Bytes", "Timestamp": at},
                            {"MetricName": "OperationsPendingReplication", "Dimensions": dims, "Value": 0.0, "Unit": "Count",
                             "Timestamp": at}], rule.destination_region
        self.admin("cloudwatch", rule.source_account, region).put_metric_data(Namespace="AWS/S3", MetricData=data)

    def stall(self, source: str) -> None:
        """Replication of ``source``'s rules stops: new objects stay PENDING."""
        for r in self.replication[source]:
            r.latency = None

    def resume(self, source: str, latency: float = 4.0) -> None:
        """Replication of ``source`` works again (what was pending completes ``latency`` after its PUT)."""
        for r in self.replication[source]:
            r.latency, r.outcome = latency, "COMPLETED"

    def fail(self, source: str) -> None:
        """S3 fails to replicate ``source``'s objects (FAILED)."""
        for r in self.replication[source]:
            r.latency, r.outcome = 1.0, "FAILED"

    def throttle(self, route: str) -> None:
        """Every read (Query, GetItem) of ``route``'s own items in the latency table is throttled from
        now on, as DynamoDB throttles one hot partition key and not the table: the route's records,
        rollups, heartbeat state and lease (``<route>`` and ``<route>#...`` partitions; core/partitions.py);
        a BatchGetItem answers the others and returns the route's keys in ``UnprocessedKeys``."""
        self._throttled.add(route)

    def _throttled_read(self, params: Mapping[str, Any]) -> bool:
        values = [(params.get("Key") or {}).get("route"), *(params.get("ExpressionAttributeValues") or {}).values()]
        keys = {str(v["S"]) for v in values if isinstance(v, Mapping) and "S" in v}  # a GetItem's key, a Query's :pk
        return any(k == r or k.startswith(f"{r}#") for k in keys for r in self._throttled)

    def _batch_get_throttled(self, client: Any, original: Callable[..., Any], params: dict[str, Any]) -> Any:
        """BatchGetItem with throttled keys: the others are read and the throttled ones come back in
        ``UnprocessedKeys``; none readable is ProvisionedThroughputExceededException (BatchGetItem,
        DynamoDB API reference)."""
        from botocore.exceptions import ClientError

        hot: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for table, request in params["RequestItems"].items():
            keys = request["Keys"]
            throttled = [k for k in keys if self._throttled_read({"Key": k})]
            if throttled:
                hot[table] = {**request, "Keys": throttled}
            if len(throttled) < len(keys):
                rest[table] = {**request, "Keys": [k for k in keys if k not in throttled]}
        if not hot:
            return original(client, "BatchGetItem", params)
        if not rest:
            answer: Any = {"Error": {"Code": "ProvisionedThroughputExceededException",
                                     "Message": "The level of configured provisioned throughput for the table was exceeded"},
                           "ResponseMetadata": {"HTTPStatusCode": 400}}
            raise ClientError(answer, "BatchGetItem")
        response = original(client, "BatchGetItem", {**params, "RequestItems": rest})
        response["UnprocessedKeys"] = {**response.get("UnprocessedKeys", {}), **hot}
        return response

    def hang(self, route: str, function: str = "UploadProbe") -> threading.Event:
        """Steps of ``route`` in ``function`` hang (a connection that never answers) until the
        returned event is set; the driver does not wait for them."""
        event = threading.Event()
        self._hangs[f"{function}:{route}"] = event
        return event

    # ------------------------------------------------------------------ running functions
    def deps(self, function: str) -> wiring.Deps:
        """The function's wiring as Lambda builds it (``wiring.from_env`` on its environment, at its
        first invocation: a cold start), on the harness's clock."""
        if function not in self._deps:
            with self._context(function, self.environment(function)):
                self._deps[function] = dataclasses.replace(wiring.from_env(os.environ), clock=self.clock)
        return self._deps[function]

    def _cached_per_function(self, service: str, call: Any, region: str | None = None, endpoint_url: str | None = None,
                             keys: tuple[str, str] | None = None, profile: str | None = None, role_arn: str | None = None,
                             external_id: str | None = None) -> Any:
        """adapters/clients.py ``cached``, one cache per function (each function is its own Lambda
        execution environment, with its own role's credentials)."""
        from replmon.adapters import clients

        key = (self._current, os.environ.get("AWS_ACCESS_KEY_ID"), service, call, region, endpoint_url, keys, profile, role_arn,
               external_id)
        if key not in self._client_cache:
            self._client_cache[key] = clients.client(service, call, region=region, endpoint_url=endpoint_url, keys=keys,
                                                     profile=profile, role_arn=role_arn, external_id=external_id)
        return self._client_cache[key]

    def _handler(self, function: str) -> Callable[[dict[str, Any], Any], Any]:
        def run(event: dict[str, Any], context: Any) -> Any:
            return self.invoke(function, event)

        return run

    def _hang_key(self, function: str, event: Any) -> str | None:
        route = event.get("route", {}).get("name") if isinstance(event, dict) and isinstance(event.get("route"), dict) else None
        key = f"{function}:{route}"
        return key if key in self._hangs else None

    @property
    def _current(self) -> str | None:
        return getattr(self._ctx, "function", None)

    @contextlib.contextmanager
    def _context(self, function: str | None, env: Mapping[str, str], out: Any = None) -> Iterator[None]:
        """This thread runs as ``function``: its environment (os.environ reads it), its stdout."""
        import sys

        if not isinstance(sys.stdout, _ThreadStdout):  # pytest's capture puts its own back between a test's phases
            sys.stdout = _ThreadStdout(sys.stdout, self._ctx)
        saved = dict(self._ctx.__dict__)
        driven = self._driven()
        self._ctx.function, self._ctx.env, self._ctx.out, self._ctx.driven = function, dict(env), out, driven
        try:
            yield
        finally:
            self._ctx.__dict__.clear()
            self._ctx.__dict__.update(saved)

    def invoke(self, function: str, event: Any) -> Any:
        """Run the function's handler on ``event`` as Lambda would: its environment, its role's
        credentials, its wiring; its EMF and logs kept. Raises what the handler raises."""
        hang = self._hang_key(function, event)
        if hang:
            self._hung += 1
            try:
                self._hangs[hang].wait()
            finally:
                self._hung -= 1
        out = _Stamped(self.clock)
        inv = HandlerRun(function, event, self.clock.now())
        counted = not self._driven()  # the driver's own invocations are not what it waits for
        with self._time:
            self._active += counted
        try:
            self.deps(function)  # a cold start: counted as running, the driver waits for it
            with self._context(function, self.environment(function), out):
                inv.result = load_handler(function)(event, LambdaContext(function))
            return inv.result
        except Exception as exc:
            inv.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            inv.ended = self.clock.now()
            with self._time:
                self._active -= counted
                self._time.notify_all()
            with self._lock:
                self.invocations.append(inv)
                self._keep_output(function, out.lines())

    def _keep_output(self, function: str, lines: list[tuple[float, str]]) -> None:
        for at, line in lines:
            if _EMF.match(line):
                blob = json.loads(line)
                blob["_aws"]["Timestamp"] = int(at * 1000)  # Powertools stamps EMF with the wall clock: the run's is this one
                self.emf.append((function, blob))
                for p in points_from_emf([blob]):
                    self._points.setdefault(p.metric, []).append(p)
            elif line:
                self.logs.append((function, line))

    def s3_event(self, bucket: str, kind: str, key: str, **fields: Any) -> Any:
        """An S3 event notification of ``bucket`` (``kind``: an events/s3 sample's name, e.g.
        ``replication_failed``) for ``key``, handed to IngestEvents as Lambda's SQS poller does;
        ``fields`` override the record's replicationEventData (failureReason...)."""
        from replmon.core.keys import iso_ms

        sample = Path(__file__).resolve().parents[3] / "events" / "s3" / f"{kind}.json"
        doc = json.loads(sample.read_text())
        rec = doc["Records"][0]
        rec["awsRegion"] = self.regions.get(bucket, HOME)
        rec["eventTime"] = iso_ms(self.clock.now())
        rec["s3"]["bucket"].update({"name": bucket, "arn": f"arn:aws:s3:::{bucket}"})
        rec["s3"]["object"]["key"] = key
        if "replicationEventData" in rec:
            rules = self.replication.get(bucket) or []
            if rules:
                rule = rules[0]
                rec["replicationEventData"].update({"replicationRuleId": rule.rule_id, "destinationBucket": f"arn:aws:s3:::{rule.destination}"})
            rec["replicationEventData"].update(fields)
        message = {"messageId": uuid.uuid4().hex, "receiptHandle": "h", "body": json.dumps(doc), "attributes": {"ApproximateReceiveCount": "1"},
                   "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": HOME,
                   "eventSourceARN": self.resolver.get_att("EventsQueue", "Arn")}
        return self.invoke("IngestEvents", {"Records": [message]})

    # ------------------------------------------------------------------ schedules and the clock
    def _read_schedules(self) -> list[Schedule]:
        r = self.resolver
        out = []
        for logical, res in self.template["Resources"].items():
            if not r.exists(logical):
                continue
            for name, ev in res.get("Properties", {}).get("Events", {}).items():
                if ev.get("Type") != "ScheduleV2":
                    continue
                props = r.resolve(ev["Properties"])
                target = logical.removesuffix("Function") if res["Type"] == "AWS::Serverless::Function" else logical
                raw = props.get("Input", "{}")
                out.append(Schedule(f"{logical}.{name}", target, _rate(props["ScheduleExpression"]), json.loads(raw) if raw else {},
                                    props.get("State", "ENABLED") == "ENABLED"))
        out.append(Schedule("CloudWatch.Alarms", ALARMS, 60, None, True))  # CloudWatch evaluates each alarm every minute
        order = {"Inventory": 0, "ProbeStateMachine": 1, "Heartbeat": 2, "CollectSignals": 3, ALARMS: 4}
        out.sort(key=lambda s: (order.get(s.target, 9), s.name))
        now = self.clock.now()
        for s in out:
            s.next = (now // s.every + 1) * s.every  # rates fire on the minute, aligned to their period
        return out

    def schedule(self, target: str) -> Schedule:
        return next(s for s in self.schedules if s.target == target and s.enabled)

    def advance(self, seconds: float = 0.0, *, minutes: float = 0.0, hours: float = 0.0) -> list[tuple[float, str]]:
        """Step the clock to now + the time given: at each due schedule (ties: inventory, probe runs,
        heartbeats, collector, the alarms' minute) every execution first runs up to that time (its
        sleeps and Wait states park there), then the schedule fires. Returns (time, schedule) fired."""
        start = len(self.fired)
        self._drive(self.clock.now() + seconds + 60 * minutes + 3600 * hours)
        return self.fired[start:]

    def _driven(self) -> bool:
        """This thread is the driver's (the driver itself, or a pool thread of a handler it runs)."""
        return threading.current_thread() is self._driver or bool(getattr(self._ctx, "driven", False))

    def _sleep_until(self, target: float) -> None:
        if self._driven():
            self._drive(target)
        else:
            self._park_until(target)

    def _drive(self, target: float) -> None:
        """The driver's time: step to each due schedule up to ``target``, letting the executions
        catch up first, and fire it (in this thread; a schedule still running is not fired again)."""
        while True:
            with self._schedule_lock:
                due = [s for s in self.schedules if s.enabled and s.next <= target and s.name not in self._running]
                s = min(due, key=lambda x: (x.next, self.schedules.index(x))) if due else None
            stop = s.next if s is not None else target
            with self._time:
                if stop > self._horizon:
                    # only a parked thread the new horizon wakes (or a new execution) can change anything
                    self._settled = self._settled and not any(t <= stop for t in self._parked_targets)
                    self._horizon = stop
                    self._time.notify_all()
            if not self._settled:
                self.settle()
            self.clock.set(stop)
            if s is None:
                return
            with self._schedule_lock:
                self.fired.append((s.next, s.name))
                s.next += s.every
                self._running.add(s.name)
            try:
                self.fire(s)
            finally:
                with self._schedule_lock:
                    self._running.discard(s.name)

    def _park_until(self, target: float) -> None:
        """A sleep in another thread (an execution's): up to the horizon at once, then it waits
        there for the driver."""
        handler = self._current is not None
        with self._time:
            while self._horizon < target and not self._closing:
                self.clock.set(self._horizon)
                self._parked += 1
                self._parked_handlers += handler
                self._parked_targets.append(target)
                self._time.notify_all()
                self._time.wait()
                self._parked -= 1
                self._parked_handlers -= handler
                self._parked_targets.remove(target)
        self.clock.set(target)

    def fire(self, s: Schedule) -> Any:
        """What the schedule's target does with its input (a failed invocation is kept, as the DLQ
        would; a probe run is started, not waited for: :meth:`settle` waits)."""
        if s.target == ALARMS:
            return self.evaluate_alarms()
        if s.target == "ProbeStateMachine":
            return self.start_execution(s.input)
        with contextlib.suppress(Exception):
            return self.invoke(s.target, s.input)
        return None

    def start_execution(self, payload: Any) -> str:
        arn = str(self.machine.sfn.start_execution(stateMachineArn=self.machine.arn, name=uuid.uuid4().hex,
                                                   input=json.dumps(payload))["executionArn"])
        self._executions.append(arn)
        self.execution_starts[arn] = self.clock.now()
        self._settled = False
        return arn

    def run_state_machine(self, payload: Any, timeout: float = 120.0) -> Any:
        """Start an execution and wait for its end (or until only hung steps are left); its description."""
        arn = self.start_execution(payload)
        self.settle(timeout)
        return self.machine.sfn.describe_execution(executionArn=arn)

    def settle(self, timeout: float = 120.0, until_end: bool = False) -> None:
        """Until every execution has ended or waits: parked at the horizon, or hung
        (``until_end``: ended). An execution between two states is seen by no counter: the state
        is taken as settled once nothing changed for a while."""
        deadline = time.monotonic() + timeout
        quiet_since, seen = time.monotonic(), None
        while True:
            running = self._running_executions()
            if not running:
                self._settled = True
                return
            with self._time:
                state = (len(self.invocations), self._parked, self._active, self._hung)
                busy = self._active > self._parked_handlers
                waiting = self._parked + self._hung >= len(running)  # each execution has a thread that waits
            if state != seen or busy:
                quiet_since, seen = time.monotonic(), state
            elif not until_end and time.monotonic() - quiet_since > (QUIET_SECONDS if waiting else UNSEEN_SECONDS):
                self._settled = waiting  # an execution seen by no counter may move on its own: settle again next time
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"executions still running after {timeout} s: {running}")
            time.sleep(0.01)

    def _running_executions(self) -> list[str]:
        """Executions still RUNNING (read from moto's backend: the API call costs ~1 ms each time)."""
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        backend = stepfunctions_parser_backends[HUB][HOME]
        done = {a for a in self._executions if backend.describe_execution(a).status != "RUNNING"}
        self._executions = [a for a in self._executions if a not in done]
        self._ended += len(done)
        return list(self._executions)

    # ------------------------------------------------------------------ what an operator sees
    def points(self, metric: str, **dimensions: str) -> list[Point]:
        """Every observation of ``metric`` whose dimensions include ``dimensions`` (CloudWatch's view of the EMF)."""
        return [p for p in self._points.get(metric, []) if all(p.dimensions.get(k) == v for k, v in dimensions.items())]

    def _read_alarms(self) -> dict[str, tuple[AlarmEvaluator, dict[str, Any]]]:
        r = self.resolver
        out = {}
        for name, res in self.template["Resources"].items():
            if res.get("Type") == "AWS::CloudWatch::Alarm" and "Metrics" in res.get("Properties", {}) and r.exists(name):
                props = r.resolve(res["Properties"])
                out[name] = (AlarmEvaluator.from_properties(props), props)
        return out

    def _read_contributor_rules(self) -> dict[str, list[str]]:
        """Alarm logical id -> the topics its contributors' state changes reach through an EventBridge
        rule of template.yaml matching "CloudWatch Alarm Contributor State Change" on its ARN."""
        out: dict[str, list[str]] = {}
        r = self.resolver
        for name, res in self.template["Resources"].items():
            props = res.get("Properties", {})
            pattern = props.get("EventPattern") or {}
            if res.get("Type") != "AWS::Events::Rule" or not r.exists(name) or \
                    "CloudWatch Alarm Contributor State Change" not in pattern.get("detail-type", []):
                continue
            targets = [str(r.resolve(t["Arn"])) for t in props.get("Targets", [])]
            for ref in pattern.get("resources", []):
                att = ref.get("Fn::GetAtt") if isinstance(ref, dict) else None
                logical = (att.split(".")[0] if isinstance(att, str) else att[0]) if att else None
                if logical:
                    out.setdefault(logical, []).extend(targets)
        return out

    def _topic(self, arn: str) -> str:
        return "page" if arn == self.page_topic else "ticket" if arn == self.ticket_topic else arn

    def evaluate_alarms(self) -> None:
        """Each Metrics Insights alarm at the clock's minute; a contributor's change of state notifies
        the alarm's topic (AlarmActions on ALARM, OKActions on OK) naming the route, and goes to
        EventBridge as a "CloudWatch Alarm Contributor State Change" event, which the stack's rules
        forward to their topic (the event as the message, no subject)."""
        now = self.clock.now()
        for name, (ev, props) in self.alarms.items():
            state = ev.step(now, self._points.get(ev.query.metric, []))
            before = self.alarm_states.setdefault(name, {})
            for key, c in state.contributors.items():
                if before.get(key, "OK") != c.state:
                    actions = props.get("AlarmActions" if c.state == "ALARM" else "OKActions") or []
                    alarm_name = props.get("AlarmName") or f"{STACK}-{name}"
                    for arn in actions:
                        self.notifications.append(TopicMessage(
                            self._topic(arn), f"alarm:{name}", f'{c.state}: "{alarm_name}" in {HOME}',
                            json.dumps({"AlarmName": alarm_name, "NewStateValue": c.state, "NewStateReason": c.reason,
                                        "AlarmContributorAttributes": c.attributes}), now, c.state))
                    event = {"version": "0", "id": str(uuid.uuid4()), "detail-type": "CloudWatch Alarm Contributor State Change",
                             "source": "aws.cloudwatch", "account": HUB, "region": HOME,
                             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                             "resources": [f"arn:aws:cloudwatch:{HOME}:{HUB}:alarm:{alarm_name}"],
                             "detail": {"alarmName": alarm_name, "alarmContributor": {"attributes": c.attributes},
                                        "state": {"value": c.state, "reason": c.reason},
                                        "previousState": {"value": before.get(key, "OK")}}}
                    for arn in self.page_rules.get(name, []):
                        self.notifications.append(TopicMessage(self._topic(arn), f"alarm:{name}", "", json.dumps(event), now, c.state))
                before[key] = c.state

    def alarm_state(self, alarm: str, route: str) -> str:
        """A route's contributor state in a fleet alarm (OK when it never was one)."""
        return next((s for k, s in self.alarm_states.get(alarm, {}).items() if route in k), "OK")

    def pages(self, naming: str | None = None, since: float = 0.0) -> list[TopicMessage]:
        return [n for n in self.notifications if n.topic == "page" and n.at >= since and (naming is None or n.names(naming))]

    def tickets(self, naming: str | None = None, since: float = 0.0) -> list[TopicMessage]:
        return [n for n in self.notifications if n.topic == "ticket" and n.at >= since and (naming is None or n.names(naming))]

    def denied(self) -> list[Call]:
        return [c for c in self.calls if c.denied]

    def registry(self) -> list[Any]:
        """Every valid registry route of every group (what the functions read)."""
        reg = self.deps("Report").registry
        assert reg is not None
        return [s for g in self.deps("Report").fleet.groups for s in reg.routes(g)]

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        """Every version and delete marker left under ``prefix`` (``key@version``), and incomplete uploads."""
        s3 = self.admin("s3", self.owners[bucket], self.regions[bucket])
        out = []
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            out += [f"{v['Key']}@{v['VersionId']}" for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        out += [f"{u['Key']} (upload)" for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])]
        return out

    @contextlib.contextmanager
    def operator(self, account: str = HUB) -> Iterator[None]:
        """Run code as an operator of ``account`` (its administrator's credentials, not judged by the
        gate; the stack's Region and table; time.time is the run's clock), with the stack described in
        CloudFormation as `--stack-name` reads it. tests/deployed/scenario.py ``replmon`` runs the CLI so."""
        creds = self._credentials(f"arn:aws:iam::{account}:role/harness-admin")
        env = {"AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
               "AWS_SESSION_TOKEN": creds["SessionToken"], "AWS_REGION": HOME, "AWS_DEFAULT_REGION": HOME, "REPLMON_TABLE": TABLE,
               "COLUMNS": "200"}
        self._describe_stack()
        with self._context("operator", env), mock.patch("time.time", self.clock.now):
            yield

    def _describe_stack(self) -> None:
        """The stack in CloudFormation with template.yaml's outputs and parameters, as `replmon
        uninstall --stack-name` and `replmon report --stack-name` read it (moto's CloudFormation)."""
        if "cfn" in self._client_cache:
            return
        r = self.resolver
        outputs = {}
        for k, v in self.template.get("Outputs", {}).items():
            if "Condition" in v and not r.condition(v["Condition"]):
                continue  # e.g. a fleet-only hub's SourceBucket
            with contextlib.suppress(KeyError):  # the roles SAM generates are not in the raw template
                outputs[k] = str(r.resolve(v["Value"]))
        params = {k: r.ref(k) for k in ("ProbePrefix", "BucketMode", "RouteName")}
        body = {"Parameters": {k: {"Type": "String"} for k in params},
                "Resources": {"Placeholder": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                "Outputs": {k: {"Value": v} for k, v in outputs.items() if v}}
        self.admin("cloudformation", HUB).create_stack(StackName=STACK, TemplateBody=json.dumps(body),
                                                      Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in params.items()])
        self._client_cache["cfn"] = True


class _ThreadEnviron(MutableMapping[str, str]):
    """os.environ as each thread sees it: a handler's own environment (Lambda gives each function
    its own process), else the process's."""

    def __init__(self, base: Any, ctx: threading.local) -> None:
        self.base, self.ctx = base, ctx

    def _map(self) -> Any:
        env = getattr(self.ctx, "env", None)
        return self.base if env is None else env

    def __getitem__(self, key: str) -> str:
        return str(self._map()[key])

    def __setitem__(self, key: str, value: str) -> None:
        self._map()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._map()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._map()))

    def __len__(self) -> int:
        return len(self._map())

    def copy(self) -> dict[str, str]:
        return dict(self._map())


class _ThreadStdout(io.TextIOBase):
    """sys.stdout as each thread sees it: the running handler's capture, else the process's."""

    def __init__(self, base: Any, ctx: threading.local) -> None:
        self.base, self.ctx = base, ctx

    def write(self, text: str) -> int:
        out = getattr(self.ctx, "out", None)
        return int((out or self.base).write(text))

    def flush(self) -> None:
        out = getattr(self.ctx, "out", None)
        (out or self.base).flush()


@contextlib.contextmanager
def _thread_context(ctx: threading.local) -> Iterator[None]:
    """Per-thread environment and stdout, handed on to the threads a handler's pools start."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    submit = ThreadPoolExecutor.submit

    def submit_in_context(pool: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        state = dict(ctx.__dict__)
        if not state:
            return submit(pool, fn, *args, **kwargs)

        def run() -> Any:
            ctx.__dict__.update(state)
            try:
                return fn(*args, **kwargs)
            finally:
                ctx.__dict__.clear()

        return submit(pool, run)

    with mock.patch.object(os, "environ", _ThreadEnviron(os.environ, ctx)), mock.patch.object(ThreadPoolExecutor, "submit", submit_in_context):
        try:
            yield
        finally:
            while isinstance(sys.stdout, _ThreadStdout):  # the stack's own, wherever it was installed
                sys.stdout = sys.stdout.base


class _Stamped(io.StringIO):
    """A handler's stdout, each line stamped with the clock when it was written."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self._lines: list[tuple[float, str]] = []
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *done, self._partial = self._partial.split("\n")
        now = self.clock.now()
        self._lines += [(now, line.strip()) for line in done]
        return len(text)

    def lines(self) -> list[tuple[float, str]]:
        return self._lines + ([(self.clock.now(), self._partial.strip())] if self._partial.strip() else [])


_STATE_MACHINE_FUNCTIONS = ("PlanProbes", "BeginRouteRun", "EndRouteRun", "Housekeeping", "UploadProbe", "PollReplication",
                            "RecordResult", "Cleanup")


class _LazyDeps(Mapping[str, "wiring.Deps"]):
    """``wiring.injected`` for every function: its own :meth:`DeployedStack.deps`, built on first use."""

    def __init__(self, stack: DeployedStack) -> None:
        self.stack = stack

    def __getitem__(self, name: str) -> wiring.Deps:
        if name not in FUNCTIONS:
            raise KeyError(name)
        return self.stack.deps(name)

    def __contains__(self, name: object) -> bool:
        return name in FUNCTIONS

    def __iter__(self) -> Iterator[str]:
        return iter(FUNCTIONS)

    def __len__(self) -> int:
        return len(FUNCTIONS)


__all__ = [
    "AWAY",
    "FUNCTIONS",
    "HOME",
    "HUB",
    "MEMBER_A",
    "MEMBER_B",
    "Authorizer",
    "Call",
    "DeployedStack",
    "Pair",
    "Schedule",
    "TopicMessage",
]
