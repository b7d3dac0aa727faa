"""The fleet's per-route alarms, defined once: one CloudWatch Metrics Insights alarm per signal and
RouteGroup, each route a contributor (docs/design/fleet.md 9).

A per-route signal is one :class:`FleetAlarm`; :func:`query` is its Metrics Insights query for a
group, e.g.::

    SELECT MAX(RpoSeconds) FROM SCHEMA("Replmon", RouteGroup, Route, service)
    WHERE RouteGroup = 'g00' GROUP BY Route ORDER BY MAX() DESC LIMIT 500

Why this shape (AWS's pages, cited by tests/test_fleet_alarms.py):

- ``SCHEMA`` matches only metrics with *exactly* those dimensions, and Powertools adds ``service`` to
  every set the code emits: the schema names ``service`` too (core/telemetry.py holds the sets).
- A multi-time-series alarm needs ``GROUP BY`` *and* ``ORDER BY``; each series is a contributor with
  its own state and its own notification, naming the route.
- One page per cause and route: AWS runs the alarm's SNS actions at alarm level *and* at contributor
  level ("Acting on alarm changes"), one action list for both. A page alarm with SNS actions on the
  page topic would page again when the alarm as a whole changes (its first route in ALARM, its last
  out). So page alarms have no SNS actions; a rule per group (:func:`_page_rule`) forwards only their
  "CloudWatch Alarm Contributor State Change" events to the page topic. Ticket alarms keep SNS
  actions (both levels land on the ticket topic: a record, nobody woken). The Heartbeat's evidence
  goes to the ticket topic too: the contributor is the page.
- One query evaluates at most 500 series (more: PARTIAL_DATA, the rest unseen), at most 10,000
  matched metrics, only the last 3 hours, and at most 100 contributors are in ALARM at once; the
  account has 200 Metrics Insights alarms per Region by default. ``RouteGroup`` shards the fleet
  (``RouteGroups`` = 1..8, group_of(route) = crc32 mod RouteGroups): at most 500 routes per group
  (core/registry.py MAX_ROUTES_PER_GROUP, 4,000 in all); past 500 a group's alarms report
  PARTIAL_DATA and ``ORDER BY ... DESC LIMIT 500`` makes the 500 worst routes the ones evaluated.
  8 groups x 15 alarms = 120 alarms.
- An evaluation judges the most recent real datapoints of its evaluation range (more periods than
  EvaluationPeriods), and a series with none left in it turns its contributor OK whatever
  TreatMissingData says. So the 0/1 and burn signals (RpoUnbounded, RouteNoData, the burn pair, RTC
  pending) are sparse, emitted only when non-zero, and once as 0 when they fall back (signals/health.py
  publish_health): the 0 clears the contributor at the next evaluation (a series that just stopped
  would hold its last 1 until it left the range), their alarms treat missing data as not breaching,
  and CloudWatch bills a metric only for the hours it has data. RpoSeconds and StallSeconds carry values and stay
  continuous; RpoSeconds only with an RPO input, on purpose: a route without one has none (no data
  is not an RPO of 0), and RouteNoData = 1 tickets once that outlasts its class interval. An unbounded
  route keeps its RpoSeconds (the measured lower bound, signals/health.py publish_health), so a late
  route turning unbounded sends no OK on RpoAboveTarget while RpoUnbounded pages.
- The event counts (ProbeFailed, ProbeStuck, ProbeError, RecordSpooled, RecordLost, CleanupFailed,
  RunSkipped, InvalidRoute, ReplicationEvents; :attr:`FleetAlarm.counts_events`) are emitted only when
  non-zero and never as 0: their emitters (a probe's RecordResult and Cleanup steps, the lease's
  skip, the planner, event ingest) keep no per-route memory across runs to send a 0 from. Under the same rule one count keeps its route in ALARM
  until its datapoint leaves the evaluation range (15 minutes at 5-minute periods, 3 hours at an
  hour's), and a repeat meanwhile sends nothing: :meth:`FleetAlarm.clears` writes that into each
  one's Runbook (docs/ALARMS.md), tests/test_alarm_transcripts.py holds it to the evaluator.

:func:`resources` renders each alarm for each group as template.yaml resources (one Condition per
group beyond g00); ``tools/render_fleet.py`` writes them between markers and
tests/test_fleet_alarms.py fails when the checked-in template differs from a fresh render.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from replmon.core.registry import MAX_ROUTE_GROUPS, MAX_ROUTES_PER_GROUP, group_names
from replmon.core.telemetry import EVENT, NAMESPACE, PER_ROUTE, PER_ROUTE_REASON, ROUTE, ROUTE_GROUP, SERVICE_DIM

Function = Literal["MAX", "MIN", "SUM", "AVG", "COUNT"]
Severity = Literal["page", "ticket"]

#: AWS's limits the alarms are built around (tests/test_fleet_alarms.py cites the pages).
MI_ALARMS_PER_REGION = 200
MAX_SERIES_PER_QUERY = 500
MAX_CONTRIBUTORS_IN_ALARM = 100
MAX_EVALUATED_SECONDS = 3 * 3600

OPS = {">": "GreaterThanThreshold", ">=": "GreaterThanOrEqualToThreshold", "<": "LessThanThreshold",
       "<=": "LessThanOrEqualToThreshold"}
TOPIC = {"page": ("CreatePageTopic", "PageTopic", "PageTopicArn"),
         "ticket": ("CreateTicketTopic", "TicketTopic", "TicketTopicArn")}


#: The evaluation range (AWS, "Configuring how CloudWatch alarms treat missing data", section "How
#: alarm state is evaluated when data is missing"): at each evaluation CloudWatch retrieves more
#: datapoints than EvaluationPeriods, "the exact number ... depends on the length of the alarm period
#: and whether it is based on a metric with standard resolution or high resolution"; the page's one
#: worked example retrieves 5 for EvaluationPeriods 3. Modelled as EvaluationPeriods + this many
#: (an assumption from that example; local/insights.py's AlarmEvaluator takes another).
EXTRA_RANGE_PERIODS = 2

@dataclass(frozen=True)
class FleetAlarm:
    """One per-route signal, alarmed for every route of a group by one Metrics Insights alarm."""

    name: str  # the logical id is <name><G00>Alarm
    metric: str  # a core/telemetry.py metric with RouteGroup and Route in its dimension set
    function: Function
    op: str  # ">", ">=", ...
    threshold: float | str  # a number, or a template parameter's name
    severity: Severity
    description: str
    causes: str
    action: str
    period: int = 300
    evaluation_periods: int = 1
    datapoints: int = 1
    schema: tuple[str, ...] = PER_ROUTE  # without service (added: Powertools puts it on every set)
    where: tuple[tuple[str, str], ...] = ()  # extra fixed dimensions (Event = '...')
    # One page per cause (docs/ALARMS.md): an alarm whose cause always raises another page alarm too
    # keeps its state (alarm history, dashboard, `replmon report`) but notifies nobody; the named
    # alarms page, naming the route. (A composite could de-duplicate them, but a composite sees only
    # alarm-level state: its notification could not name the route.)
    covered_by: tuple[str, ...] = ()

    @property
    def notifies(self) -> bool:
        return not self.covered_by

    @property
    def counts_events(self) -> bool:
        """A count of events over one period (SUM, 1 of 1): emitted only when non-zero, never as 0."""
        return self.function == "SUM" and self.evaluation_periods == 1 and self.datapoints == 1

    @property
    def range_periods(self) -> int:
        """The periods one evaluation retrieves (its evaluation range, local/insights.py
        AlarmEvaluator.range_periods: EvaluationPeriods + 2, within the 3 hours evaluated)."""
        return max(self.evaluation_periods, min(self.evaluation_periods + EXTRA_RANGE_PERIODS,
                                                MAX_EVALUATED_SECONDS // self.period))

    def clears(self) -> str:
        """When a count alarm's route goes back to OK, and what a repeat inside that time sends
        (AWS, "Configuring how CloudWatch alarms treat missing data": each evaluation judges the most
        recent real datapoint of its evaluation range, TreatMissingData ignored while one is there).
        A count is never emitted as 0, so its datapoint is the most recent real one until it leaves
        the range. '' for the other alarms."""
        if not self.counts_events:
            return ""
        span = _duration(self.period * self.range_periods)
        under = (f" (a later period counting fewer than {_number(self.threshold)} sends OK at its end)"
                 if isinstance(self.threshold, (int, float)) and self.threshold > 1 else "")
        return (f"Clears: OK about {span} after the end of the last {_duration(self.period)} period with a count{under}: "
                f"a count is never emitted as 0, so its datapoint stays the most recent in the evaluation range "
                f"({self.range_periods} periods) until it leaves it, and TreatMissingData applies only with none left. "
                f"Another count in that time sends no new notification and moves the OK on (each count is a datapoint "
                f"of the route's {self.metric})")


FLEET_ALARMS: tuple[FleetAlarm, ...] = (
    # ---- page: the route is late or losing objects now
    FleetAlarm(
        "RpoAboveTarget", "RpoSeconds", "MAX", ">", "LatencyTargetSeconds", "page",
        "A route's RPO (oldest probe in flight, recent probe latency, RTC ReplicationLatency) is above LatencyTargetSeconds.",
        "the route's RPO now (oldest probe in flight, recent probe latency, RTC ReplicationLatency) is above LatencyTargetSeconds",
        "the notification's Route attribute names the route: replmon report --route ROUTE for the inputs; check S3's "
        "BytesPendingReplication; if the source's write rate rose, RTC's SLA may still hold - compare with RtcLatency"),
    FleetAlarm(
        "RouteStalled", "StallSeconds", "MAX", ">", 0, "page",
        "A route's heartbeats stopped replicating: two consecutive heartbeats late past the route's learned expectation "
        "(StallSeconds = seconds since the stall began; the Heartbeat function's message has the evidence).",
        "replication on the route has stopped or nearly: the source's replication role, KMS key or destination changed, "
        "S3 is degraded in a Region, or a bucket policy now denies the replica",
        "the Heartbeat's message on the ticket topic names the evidence (oldest pending heartbeat, expectation, S3's pending "
        "operations); replmon report --route ROUTE; replmon preflight --source-bucket SRC names a broken precondition. "
        "OK = recovered (3 healthy minutes). RpoAboveTarget pages too if the stall outlasts the latency target",
        # 1 of 3 minutes, missing data notBreaching (AWS, "Alarm evaluation" and "Configuring how CloudWatch
        # alarms treat missing data"): each evaluation judges the most recent real datapoints of its evaluation
        # range (more periods than EvaluationPeriods: 5 for 3 in AWS's example), and a contributor whose series
        # has none in it goes OK whatever TreatMissingData says. Over 1 period (a range of about 3 minutes) three
        # missed Heartbeat minutes sent OK and the next minute paged again, and one healthy minute sent OK.
        # Over 3 periods lost minutes are skipped or count as not breaching, and 1 breaching datapoint of the 3
        # keeps ALARM: the first stalled minute pages, OK needs 3 healthy minutes, and a series gone that long
        # is HeartbeatRunGNNAlarm's (3 minutes without a Heartbeat run).
        period=60, evaluation_periods=3, datapoints=1),
    FleetAlarm(
        "RpoUnbounded", "RpoUnbounded", "MAX", ">=", 1, "page",
        "An object is known not to be on a route's destination (a failed probe or a failed replication event): the RPO is unbounded.",
        "a probe FAILED or S3 reported OperationFailedReplication in the RPO window: some object will not replicate by itself",
        "replmon report --route ROUTE names the failed probe or event; replmon preflight --source-bucket SRC names the broken "
        "precondition; re-replicate with S3 Batch Replication once fixed"),
    FleetAlarm(
        "SloFastBurn", "SloBurnPage", "MAX", ">", 14.4, "page",
        "A route's SLO error budget burns at more than 14.4x over 1 h and over the short window (SloBurnPage = the smaller of the two).",
        "2 % of the month's error budget burned within 1 h (14.4x over 1 h and 5 min): most of the route's probes are late or failing now",
        "treat as an outage of the route; replmon report --route ROUTE shows SLO attainment, budget left and the late probes",
        covered_by=("RpoAboveTarget", "RpoUnbounded")),  # 14.4x over 5 min too: the recent probes are late (RPO) or failed (unbounded)
    FleetAlarm(
        "ProbeFailed", "ProbeFailed", "SUM", ">=", 1, "page",
        "S3 reported a probe's replication FAILED on a route, or a replica did not match.",
        "S3 marked a probe FAILED (role lost permissions, destination bucket policy or KMS key changed, versioning suspended "
        "on the destination) or a replica did not match",
        "replmon preflight --source-bucket SRC names the broken precondition; the record's reason says what S3 answered",
        covered_by=("RpoUnbounded",)),  # a FAILED probe makes the RPO unbounded at the next collector run
    FleetAlarm(
        "ReplicationFailedEvent", "ReplicationEvents", "SUM", ">", 0, "page",
        "S3 sent OperationFailedReplication for an object on a route (an S3 event notification, not a probe).",
        "S3 sent s3:Replication:OperationFailedReplication for a real object; failureReason names why "
        "(AssumeRoleNotPermitted, DstBucketUnversioned, KMS errors...)",
        "read the event in the latency table (replmon report --format json) or the events queue; fix the named cause; "
        "re-replicate the objects with S3 Batch Replication",
        schema=(ROUTE_GROUP, ROUTE, EVENT), where=((EVENT, "OperationFailedReplication"),),
        covered_by=("RpoUnbounded",)),  # a failed replication event makes the RPO unbounded at the next collector run
    # ---- ticket: working hours
    FleetAlarm(
        "SloSlowBurn", "SloBurnTicket", "MAX", ">", 6, "ticket",
        "A route's SLO error budget burns at more than 6x over 6 h and over the short window (SloBurnTicket = the smaller of the two).",
        "5 % of the error budget burned within 6 h (6x over 6 h and 30 min): the route is steadily slower than its SLO",
        "replmon report --route ROUTE --hours 24 for the late probes; decide whether the target or the route needs to change"),
    FleetAlarm(
        "MissedThresholdEvent", "ReplicationEvents", "SUM", ">", 0, "ticket",
        "S3 sent OperationMissedThreshold for an object on a route (an S3 event notification, not a probe).",
        "S3 sent s3:Replication:OperationMissedThreshold: an object took longer than RTC's 15 minutes",
        "compare with RpoAboveTarget (pages when over your target); S3 may credit missed RTC SLA time",
        schema=(ROUTE_GROUP, ROUTE, EVENT), where=((EVENT, "OperationMissedThreshold"),)),
    FleetAlarm(
        "ProbeStuck", "ProbeStuck", "SUM", ">=", 1, "ticket",
        "A route's probe was still PENDING when its timeout ran out.",
        "a probe was still PENDING at its timeout (ExpertSettings probe_timeout_seconds): a very slow route, or S3 keeping a failing object PENDING",
        "check RpoAboveTarget for the route (it pages if the route is late); look for the probe's key on the destination; "
        "raise ExpertSettings probe_timeout_seconds if the largest probe size needs it"),
    FleetAlarm(
        "ProbeError", "ProbeError", "SUM", ">=", 1, "ticket",
        "A route's probe could not be measured (upload or polling error); replication itself is unknown.",
        "a probe could not be measured (upload or polling error): credentials, a bucket policy denying replmon's role, "
        "throttling, a network error",
        "the execution's failed step has the error; replmon probe --stack-name STACK --sizes smoke reproduces it with a readable message"),
    FleetAlarm(
        "RunSkipped", "RunSkipped", "SUM", ">=", 2, "ticket",
        "A route's runs were skipped twice within an hour because its previous run still held the route's lease (runs pile up).",
        "runs outlast the schedule: the route's previous run still held its lease (a replication stall holds probes to their "
        "timeout, or the schedule is shorter than a run's worst case)",
        "the skip items <route>#runs/<run id>#skipped name the holding execution and its lease expiry; check the RPO and stuck "
        "probes, or lengthen ScheduleRateMinutes / shorten the probe timeout",
        period=3600),
    FleetAlarm(
        "RecordSpooled", "RecordSpooled", "SUM", ">=", 1, "ticket",
        "The latency store could not take a route's probe record; it waits in the spool for the next run's Housekeeping.",
        "the latency table refused a record (throttling, an outage, a permission change); it waits in the spool queue",
        "nothing is lost yet: Housekeeping replays the spool on the next run; if it persists, check the table and the RecordResult role"),
    FleetAlarm(
        "RecordLost", "RecordLost", "SUM", ">=", 1, "ticket",
        "A route's probe record could be neither stored nor spooled (that measurement is lost).",
        "a record could be neither stored nor spooled: table and spool queue both failed",
        "that measurement is lost; check the table, the spool queue and RecordResult's logs"),
    FleetAlarm(
        "RouteNoData", "RouteNoData", "MAX", ">=", 1, "ticket",
        "A probe-mode route has had no RPO input (probe, heartbeat or RTC ReplicationLatency) for longer than its most "
        "frequent size class interval: it has no RpoSeconds, so RpoAboveTarget cannot see it.",
        "nothing measured the route: its runs are deferred or skipped (ExpertSettings fleet_max_route_runs, a held lease), its probes end "
        "in ERROR (credentials, a bucket policy), or the registry's classes are longer than expected",
        "replmon report --route ROUTE (NO DATA names what is missing); the execution history of ProbeStateMachine for "
        "the route's runs; RunSkipped and ProbeError for the route"),
    FleetAlarm(
        "CleanupFailed", "CleanupFailed", "SUM", ">=", 1, "ticket",
        "A Cleanup could not remove a route's probe objects or uploads (the sweep retries once they expire).",
        "Cleanup could not remove a probe's objects or multipart uploads (permissions, a bucket policy, object lock)",
        "the probe prefix's lifecycle rule expires them; replmon uninstall --stack-name STACK (a dry run) lists what is left"),
    FleetAlarm(
        "InvalidRoute", "InvalidRoute", "SUM", ">=", 1, "ticket",
        "A registry item is not a valid route (a field missing or wrong), or a route's or group's reads fail: every "
        "reader skips only it, the other routes run.",
        "a registry item was written by hand or by an older version and fails validation (no destinations, a name like "
        "'old..name', an unknown field), or the registry group's read (PlanProbes, CollectSignals) or one route's own "
        "items (its lease in PlanProbes, its records in CollectSignals) were throttled or denied (Reason ReadFailed)",
        "replmon fleet --stack-name STACK names the item, the field and the fix; correct it with replmon fleet put FILE "
        "(or delete the item); ReadFailed: replmon report --fleet names the route and the error; check the functions' "
        "roles and the table's throttling",
        # emitted once a plan (every ScheduleRateMinutes, 15 by default): an hour's period keeps a bad item
        # in ALARM between plans, where 5 minutes would send OK and ALARM again every tick
        schema=PER_ROUTE_REASON, period=3600),
)


def _duration(seconds: int) -> str:
    return f"{seconds // 3600} h" if seconds % 3600 == 0 else f"{seconds // 60} min"


def runbook_action(alarm: FleetAlarm) -> str:
    """The Runbook's Action (template.yaml Metadata, docs/ALARMS.md "what to do"): the alarm's action
    and, for a count alarm, when it clears."""
    return f"{alarm.action}. {alarm.clears()}" if alarm.clears() else alarm.action


def schema_dimensions(alarm: FleetAlarm) -> tuple[str, ...]:
    """The exact dimension set the query's SCHEMA names: the alarm's, plus Powertools' ``service``."""
    return (*alarm.schema, SERVICE_DIM)


def _quote(identifier: str) -> str:
    """Metrics Insights: identifiers of letters, digits and _ go bare; anything else in double quotes."""
    return identifier if identifier.replace("_", "a").isalnum() and not identifier[0].isdigit() else json.dumps(identifier)


def query(alarm: FleetAlarm, group: str) -> str:
    """The alarm's Metrics Insights query for one RouteGroup (``g00``)."""
    where = " AND ".join(f"{_quote(k)} = '{v}'" for k, v in ((ROUTE_GROUP, group), *alarm.where))
    return (f"SELECT {alarm.function}({_quote(alarm.metric)}) FROM SCHEMA({json.dumps(NAMESPACE)}, "
            f"{', '.join(_quote(d) for d in schema_dimensions(alarm))}) WHERE {where} GROUP BY {ROUTE} "
            f"ORDER BY {alarm.function}() DESC LIMIT {MAX_SERIES_PER_QUERY}")


def logical_id(alarm: FleetAlarm, group: str) -> str:
    return f"{alarm.name}{group.upper()}Alarm"


def group_condition(group: str) -> str | None:
    """g00 always exists; g01.. exist while RouteGroups is larger than their number (HasGroup01..07)."""
    n = int(group[1:])
    return f"HasGroup{n:02d}" if n else None


def alarm_count(route_groups: int) -> int:
    """Metrics Insights alarms a stack with ``RouteGroups = route_groups`` creates (quota: 200 per Region)."""
    return len(FLEET_ALARMS) * route_groups


def route_capacity(route_groups: int = MAX_ROUTE_GROUPS) -> int:
    """Routes the alarms watch with every series evaluated: 500 per group."""
    return MAX_ROUTES_PER_GROUP * route_groups


# ------------------------------------------------------------------------------ rendering (template.yaml text)
CONDITIONS_START = "  # >>> generated: fleet conditions (tools/render_fleet.py from src/replmon/fleet/alarms.py; do not edit)"
RESOURCES_START = "  # >>> generated: fleet alarms (tools/render_fleet.py from src/replmon/fleet/alarms.py; do not edit)"
END = "  # <<< generated"


def _yaml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def _number(v: float) -> str:
    return f"{v:g}"


def render_conditions() -> str:
    """``HasGroupNN``: RouteGroups > NN (CloudFormation has no "greater than": not one of 1..NN);
    ``HeartbeatsGNN``: the group exists and heartbeats run (its schedule ENABLED, its HeartbeatRun alarm)."""
    lines = [CONDITIONS_START]
    for n in range(1, MAX_ROUTE_GROUPS):
        equals = [f'!Equals [!Ref RouteGroups, "{k}"]' for k in range(1, n + 1)]
        rule = equals[0] if n == 1 else f"!Or [{', '.join(equals)}]"
        lines.append(f"  HasGroup{n:02d}: !Not [{rule}]")
    for group in group_names(MAX_ROUTE_GROUPS):
        lines.append(f"  {heartbeat_condition(group)}: " + (f"!And [!Condition HeartbeatsOn, !Condition {group_condition(group)}]"
                                                            if group_condition(group) else "!Condition HeartbeatsOn"))
    lines.append(END)
    return "\n".join(lines) + "\n"


def heartbeat_condition(group: str) -> str:
    return f"Heartbeats{group.upper()}"


def _heartbeat_run_alarm(group: str) -> list[str]:
    """The Heartbeat function of a group must run every minute: 3 minutes without HeartbeatRun is a
    ticket (missing data breaching: a dead function must not read as every route healthy)."""
    action = "[!If [CreateTicketTopic, !Ref TicketTopic, !Ref TicketTopicArn]]"
    return [
        f"  HeartbeatRun{group.upper()}Alarm:",
        "    Type: AWS::CloudWatch::Alarm",
        f"    Condition: {heartbeat_condition(group)}",
        "    Metadata:",
        "      Runbook:",
        f"        Causes: {_yaml_str('the Heartbeat function of the group has not run for 3 minutes: its schedule, its role, an error or a timeout; stalls are not being detected')}",
        f"        Action: {_yaml_str('the Heartbeat log group and SchedulerDeadLetterQueue; until fixed, StallSeconds reads nothing and RouteStalled cannot fire')}",
        "    Properties:",
        f"      AlarmDescription: {_yaml_str(f'No Heartbeat invocation of RouteGroup {group} completed in 3 minutes (missing data breaching).')}",
        "      Namespace: !FindInMap [Telemetry, Metrics, Namespace]",
        "      MetricName: HeartbeatRun",
        "      Dimensions:",
        "        - {Name: service, Value: !FindInMap [Telemetry, Metrics, Service]}",
        f"        - {{Name: RouteGroup, Value: {group}}}",
        "      Statistic: Sum",
        "      Period: 60",
        "      EvaluationPeriods: 3",
        "      DatapointsToAlarm: 3",
        "      Threshold: 1",
        "      ComparisonOperator: LessThanThreshold",
        "      TreatMissingData: breaching",
        f"      AlarmActions: {action}",
        f"      OKActions: {action}",
        f"      Tags: [{{Key: Severity, Value: ticket}}, {{Key: RouteGroup, Value: {group}}}]",
    ]


def _resource(alarm: FleetAlarm, group: str) -> list[str]:
    cond, topic, arn = TOPIC[alarm.severity]
    action = f"[!If [{cond}, !Ref {topic}, !Ref {arn}]]"
    threshold = f"!Ref {alarm.threshold}" if isinstance(alarm.threshold, str) else _number(alarm.threshold)
    condition = group_condition(group)
    covered = (f" Notifies nobody: its cause also raises {' or '.join(alarm.covered_by)}, which pages for the route "
               "(one page per cause).") if alarm.covered_by else ""
    return [
        f"  {logical_id(alarm, group)}:",
        "    Type: AWS::CloudWatch::Alarm",
        *([f"    Condition: {condition}"] if condition else []),
        "    Metadata:",
        "      Runbook:",
        f"        Causes: {_yaml_str(alarm.causes)}",
        f"        Action: {_yaml_str(runbook_action(alarm))}",
        "    Properties:",
        f"      AlarmDescription: {_yaml_str(f'{alarm.description} RouteGroup {group}: each route is a contributor.' + covered)}",
        "      Metrics:",
        "        - Id: q",
        f"          Expression: {_yaml_str(query(alarm, group))}",
        f"          Period: {alarm.period}",
        "          ReturnData: true",
        f"      EvaluationPeriods: {alarm.evaluation_periods}",
        f"      DatapointsToAlarm: {alarm.datapoints}",
        f"      Threshold: {threshold}",
        f"      ComparisonOperator: {OPS[alarm.op]}",
        "      TreatMissingData: notBreaching",
        # a page alarm's SNS actions would notify at alarm level too: its pages go through FleetPagesGNNRule
        *([f"      AlarmActions: {action}", f"      OKActions: {action}"] if alarm.notifies and alarm.severity != "page" else []),
        f"      Tags: [{{Key: Severity, Value: {alarm.severity}}}, {{Key: RouteGroup, Value: {group}}}]",
    ]


def paging(alarm: FleetAlarm) -> bool:
    """Reaches the page topic: page severity, not covered by another alarm's page."""
    return alarm.severity == "page" and alarm.notifies


def page_rule_id(group: str) -> str:
    return f"FleetPages{group.upper()}Rule"


def _page_rule(group: str) -> list[str]:
    """The page topic receives a page alarm's *contributor* state changes only. A multi-time-series
    alarm's SNS actions run at alarm level and at contributor level alike (AWS, "Acting on alarm
    changes": SNS notifications, Alarm Level yes, Contributor Level yes), so an AlarmActions topic
    would also hear "the alarm" go ALARM with its first route and OK with its last: a second page
    for one cause. CloudWatch sends each contributor's change to EventBridge as its own event type,
    "CloudWatch Alarm Contributor State Change" (durable delivery): this rule forwards exactly those,
    of the group's page alarms (``resources`` holds the alarm's ARN), to the page topic. One message
    per route and cause: its ALARM, then its OK."""
    condition = group_condition(group)
    arns = ", ".join(f"!GetAtt {logical_id(a, group)}.Arn" for a in FLEET_ALARMS if paging(a))
    return [
        f"  {page_rule_id(group)}:",
        "    Type: AWS::Events::Rule",
        *([f"    Condition: {condition}"] if condition else []),
        "    Properties:",
        f"      Description: {_yaml_str(f'RouteGroup {group}: each route (contributor) of a page alarm going to ALARM or OK, to the page topic; the alarm-level change is not forwarded.')}",
        "      EventPattern:",
        "        source: [aws.cloudwatch]",
        f"        detail-type: [{_yaml_str(CONTRIBUTOR_EVENT)}]",
        f"        resources: [{arns}]",
        "      Targets:",
        "        - Id: page",
        "          Arn: !If [CreatePageTopic, !Ref PageTopic, !Ref PageTopicArn]",
    ]


#: EventBridge's detail-type for one contributor's state change (AWS, "Amazon CloudWatch events").
CONTRIBUTOR_EVENT = "CloudWatch Alarm Contributor State Change"


def render_resources() -> str:
    """Every fleet alarm for every group a stack can have (g01.. behind their conditions)."""
    lines = [RESOURCES_START,
             f"  # {len(FLEET_ALARMS)} Metrics Insights alarms per RouteGroup; contributor-level notifications name the Route."]
    for group in group_names(MAX_ROUTE_GROUPS):
        for alarm in FLEET_ALARMS:
            lines += ["", *_resource(alarm, group)]
        lines += ["", *_page_rule(group)]
        lines += ["", *_heartbeat_run_alarm(group)]
    lines.append(END)
    return "\n".join(lines) + "\n"


def replace_block(template_text: str, start: str, body: str) -> str:
    """``template_text`` with the generated block that opens with the line ``start`` (through the next
    ``END`` line) replaced by ``body`` (a fresh render, markers included)."""
    head, found, rest = template_text.partition(start + "\n")
    if not found:
        raise ValueError(f"template.yaml has no line {start!r}: add it (and {END!r}) where the block goes")
    _, found, tail = rest.partition(END + "\n")
    if not found:
        raise ValueError(f"template.yaml: no {END!r} after {start!r}")
    return head + body + tail


def render_into(template_text: str) -> str:
    """template.yaml with both generated blocks replaced by a fresh render."""
    out = template_text
    for start, body in ((CONDITIONS_START, render_conditions()), (RESOURCES_START, render_resources())):
        out = replace_block(out, start, body)
    return out
