"""A local CloudWatch Metrics Insights evaluator: the subset of the query language template.yaml's
fleet alarms use, over the EMF replmon prints, and a multi-time-series alarm's per-contributor state.
No AWS account needed: the lab and the tests show exactly which route's contributor an alarm puts in
ALARM, and which notifications (alarm level, contributor level) each evaluation sends. Not in the
Lambda layer (nothing in entry/ imports it).

The subset (AWS, "Query components and syntax in CloudWatch Metrics Insights")::

    SELECT AVG|COUNT|MAX|MIN|SUM(metric) FROM namespace | SCHEMA(namespace[, key ...])
    [WHERE key = | != 'value' [AND ...]] [GROUP BY key[, ...]] [ORDER BY FUNCTION() [ASC|DESC]] [LIMIT n]

Keywords are case-insensitive, identifiers case-sensitive; identifiers with characters other than
letters, digits and ``_`` go in double quotes, label values in single quotes. ``SCHEMA`` matches only
metrics with exactly its dimension keys; a metric without a GROUP BY key lands in the group
``Other``; ORDER BY defaults to ascending; LIMIT is at most 500. Anything else is refused by name.

>>> q = parse("SELECT MAX(RpoSeconds) FROM SCHEMA(\\"Replmon\\", RouteGroup, Route, service) "
...           "WHERE RouteGroup = 'g00' GROUP BY Route ORDER BY MAX() DESC LIMIT 500")
>>> q.function, q.metric, q.namespace, q.schema, q.where, q.group_by, q.order, q.limit
('MAX', 'RpoSeconds', 'Replmon', ('RouteGroup', 'Route', 'service'), (('RouteGroup', '=', 'g00'),), ('Route',), ('MAX', True), 500)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.fleet.alarms import EXTRA_RANGE_PERIODS  # the evaluation range, modelled (its comment says how)

FUNCTIONS = ("AVG", "COUNT", "MAX", "MIN", "SUM")
MAX_LIMIT = 500  # LIMIT's maximum, and the series a query evaluates before PARTIAL_DATA
MAX_MATCHED_METRICS = 10_000
MAX_CONTRIBUTORS_IN_ALARM = 100
MAX_EVALUATED_SECONDS = 3 * 3600
OTHER = "Other"
NO_DATA_REASON = "No data was returned for this contributor"


class InsightsError(ValueError):
    """A query outside the supported subset, or an alarm AWS would refuse; the message says which part."""


# ------------------------------------------------------------------------------ parsing
_TOKEN = re.compile(r"""\s*(?:(?P<dq>"(?:[^"\\]|\\.)*")|(?P<sq>'(?:[^'\\]|\\.)*')|(?P<op>!=|[(),=])|(?P<word>[A-Za-z0-9_./:-]+))""")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Query:
    function: str
    metric: str
    namespace: str
    schema: tuple[str, ...] | None  # None: FROM namespace (any dimension set)
    where: tuple[tuple[str, str, str], ...] = ()  # (key, "=" | "!=", value)
    group_by: tuple[str, ...] = ()
    order: tuple[str, bool] | None = None  # (function, descending)
    limit: int | None = None


@dataclass(frozen=True)
class _Tok:
    kind: str  # dq | sq | op | word
    text: str

    @property
    def value(self) -> str:
        if self.kind in ("dq", "sq"):
            return re.sub(r"\\(.)", r"\1", self.text[1:-1])
        return self.text


def _tokens(text: str) -> list[_Tok]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise InsightsError(f"cannot read the query at {text[pos:pos + 20]!r} (unsupported syntax)")
        kind = m.lastgroup or ""
        out.append(_Tok(kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def keyword(self, *words: str) -> str | None:
        t = self.peek()
        if t and t.kind == "word" and t.text.upper() in words:
            self.i += 1
            return t.text.upper()
        return None

    def expect_keyword(self, word: str) -> None:
        if not self.keyword(word):
            raise InsightsError(f"expected {word} at {self._here()}")

    def op(self, *ops: str) -> str | None:
        t = self.peek()
        if t and t.kind == "op" and t.text in ops:
            self.i += 1
            return t.text
        return None

    def expect_op(self, op: str) -> None:
        if not self.op(op):
            raise InsightsError(f"expected {op!r} at {self._here()}")

    def identifier(self, what: str) -> str:
        t = self.peek()
        if t is None or t.kind not in ("word", "dq"):
            raise InsightsError(f"expected {what} at {self._here()}")
        if t.kind == "word" and not _BARE.match(t.text):
            raise InsightsError(f"{what} {t.text!r} has characters other than letters, digits and _: put it in double quotes")
        self.i += 1
        return t.value

    def function(self) -> str:
        t = self.peek()
        name = t.text.upper() if t and t.kind == "word" else ""
        if name not in FUNCTIONS:
            raise InsightsError(f"function {t.text if t else 'end of query'!r} is not one of {', '.join(FUNCTIONS)}")
        self.i += 1
        return name

    def _here(self) -> str:
        t = self.peek()
        return repr(t.text) if t else "the end of the query"


def parse(text: str) -> Query:
    """The query, or :class:`InsightsError` naming the unsupported part."""
    p = _Parser(text)
    p.expect_keyword("SELECT")
    function = p.function()
    p.expect_op("(")
    metric = p.identifier("a metric name")
    p.expect_op(")")
    p.expect_keyword("FROM")
    schema: tuple[str, ...] | None = None
    if p.keyword("SCHEMA"):
        p.expect_op("(")
        namespace = p.identifier("a namespace")
        keys = []
        while p.op(","):
            keys.append(p.identifier("a dimension key"))
        p.expect_op(")")
        schema = tuple(keys)
    else:
        namespace = p.identifier("a namespace")
    where: list[tuple[str, str, str]] = []
    if p.keyword("WHERE"):
        while True:
            key = p.identifier("a dimension key")
            op = p.op("=", "!=")
            if not op:
                raise InsightsError(f"WHERE supports = and != only, not {p._here()}")
            t = p.peek()
            if t is None or t.kind != "sq":
                raise InsightsError(f"WHERE {key} {op}: the value goes in single quotes, not {p._here()}")
            p.i += 1
            where.append((key, op, t.value))
            if p.keyword("OR"):
                raise InsightsError("WHERE supports AND only (no OR)")
            if not p.keyword("AND"):
                break
    group_by: list[str] = []
    if p.keyword("GROUP"):
        p.expect_keyword("BY")
        group_by.append(p.identifier("a GROUP BY key"))
        while p.op(","):
            group_by.append(p.identifier("a GROUP BY key"))
    order = None
    if p.keyword("ORDER"):
        p.expect_keyword("BY")
        f = p.function()
        p.expect_op("(")
        p.expect_op(")")
        order = (f, p.keyword("ASC", "DESC") == "DESC")
    limit = None
    if p.keyword("LIMIT"):
        t = p.peek()
        if t is None or not t.text.isdigit():
            raise InsightsError(f"LIMIT takes a number, not {p._here()}")
        p.i += 1
        limit = int(t.text)
        if not 1 <= limit <= MAX_LIMIT:
            raise InsightsError(f"LIMIT {limit}: the maximum is {MAX_LIMIT}")
    if p.peek() is not None:
        raise InsightsError(f"unsupported clause at {p._here()}")
    return Query(function, metric, namespace, schema, tuple(where), tuple(group_by), order, limit)


# ------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class Point:
    """One observation of one metric (one EMF value)."""

    namespace: str
    metric: str
    dimensions: Mapping[str, str]
    timestamp: float  # epoch seconds
    value: float


def points_from_emf(blobs: Iterable[Mapping[str, Any]]) -> list[Point]:
    """Every observation in EMF documents (one per metric, dimension set and value), as CloudWatch stores them."""
    out = []
    for blob in blobs:
        aws = blob["_aws"]
        t = aws["Timestamp"] / 1000.0
        for directive in aws["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                labels = {d: str(blob[d]) for d in dims}
                for metric in directive["Metrics"]:
                    raw = blob[metric["Name"]]
                    for v in raw if isinstance(raw, list) else [raw]:
                        out.append(Point(directive["Namespace"], metric["Name"], labels, t, float(v)))
    return out


def _aggregate(function: str, values: Sequence[float]) -> float:
    if function == "MAX":
        return max(values)
    if function == "MIN":
        return min(values)
    if function == "SUM":
        return math.fsum(values)
    if function == "AVG":
        return math.fsum(values) / len(values)
    return float(len(values))  # COUNT


def matches(q: Query, p: Point) -> bool:
    if p.namespace != q.namespace or p.metric != q.metric:
        return False
    if q.schema is not None and set(p.dimensions) != set(q.schema):
        return False
    for key, op, value in q.where:
        equal = p.dimensions.get(key) == value
        if equal != (op == "="):
            return False
    return True


@dataclass
class Result:
    """Each group's datapoints (None: no observation in that period), in the query's order."""

    series: dict[tuple[str, ...], list[float | None]]
    starts: list[float]  # each period's start
    partial: bool = False  # more than 500 series or 10,000 matched metrics: AWS evaluates a part only


def evaluate(q: Query, points: Iterable[Point], start: float, end: float, period: int) -> Result:
    """The query over ``[start, end)`` in ``period``-second buckets aligned to ``start``."""
    n = max(0, math.ceil((end - start) / period))
    buckets: dict[tuple[str, ...], list[list[float]]] = {}
    metrics: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    for p in points:
        if not (start <= p.timestamp < end) or not matches(q, p):
            continue
        metrics.add((p.metric, frozenset(p.dimensions.items())))
        key = tuple(p.dimensions.get(k, OTHER) for k in q.group_by)
        buckets.setdefault(key, [[] for _ in range(n)])[int((p.timestamp - start) // period)].append(p.value)
    series = {k: [_aggregate(q.function, b) if b else None for b in bs] for k, bs in buckets.items()}
    keys = list(series)
    if q.order:
        f, desc = q.order
        whole = {k: _aggregate(f, [v for b in buckets[k] for v in b]) for k in keys}
        keys.sort(key=lambda k: whole[k], reverse=desc)
    partial = len(keys) > MAX_LIMIT or len(metrics) > MAX_MATCHED_METRICS
    keys = keys[: min(q.limit or MAX_LIMIT, MAX_LIMIT)]
    return Result({k: series[k] for k in keys}, [start + i * period for i in range(n)], partial)


# ------------------------------------------------------------------------------ alarms
_COMPARE = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


@dataclass
class Contributor:
    attributes: dict[str, str]  # the GROUP BY keys and values: what a contributor notification carries
    state: str  # ALARM | OK
    reason: str


@dataclass(frozen=True)
class Notification:
    """What one evaluation sends to the alarm's SNS actions (AWS, "Acting on alarm changes": SNS
    notifications run at alarm level *and* at contributor level). ``level`` "alarm": the alarm as a
    whole entered ALARM (its first contributor) or OK (its last), no route named; "contributor":
    one route entered ALARM or OK, ``attributes`` name it. Each contributor change is also its own
    EventBridge event, "CloudWatch Alarm Contributor State Change"; the alarm's, "CloudWatch Alarm
    State Change"."""

    level: str  # alarm | contributor
    state: str  # ALARM | OK
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class AlarmState:
    state: str  # ALARM | OK | INSUFFICIENT_DATA (the alarm as a whole)
    contributors: dict[tuple[str, ...], Contributor]
    evaluation_state: str = ""  # PARTIAL_DATA when the query returned only a part
    notifications: list[Notification] = field(default_factory=list)  # this evaluation's state changes

    def in_alarm(self) -> list[dict[str, str]]:
        return [c.attributes for c in self.contributors.values() if c.state == "ALARM"]


@dataclass
class AlarmEvaluator:
    """A multi-time-series Metrics Insights alarm, evaluated the way CloudWatch documents it: each series
    a contributor with its own state, judged over the *evaluation range* (:func:`judge`: the most
    recent EvaluationPeriods real datapoints when the range holds that many, whatever TreatMissingData
    says; else every real one and the missing ones filled per TreatMissingData; M of N breaching is
    ALARM), a series the query stops returning (no datapoint in the range) goes OK, an empty result
    makes the alarm INSUFFICIENT_DATA, at most 100 contributors are in ALARM. Each step's
    :class:`Notification` list is what its SNS actions would send: one at alarm level when the alarm
    as a whole enters ALARM or OK, one per contributor that changed."""

    query: Query
    period: int
    threshold: float
    comparison: str
    evaluation_periods: int = 1
    datapoints_to_alarm: int = 1
    treat_missing: str = "missing"
    extra_range_periods: int = EXTRA_RANGE_PERIODS  # the evaluation range: EvaluationPeriods + this many periods
    contributors: dict[tuple[str, ...], Contributor] = field(default_factory=dict)
    state: str = "INSUFFICIENT_DATA"  # a new alarm's state until its first evaluation

    def __post_init__(self) -> None:
        if not self.query.group_by or not self.query.order:
            raise InsightsError("a multi-time-series alarm's query needs GROUP BY and ORDER BY")
        if self.period % 60:
            raise InsightsError(f"Period {self.period}: Metrics Insights alarms are standard resolution (multiples of 60 s)")
        if self.period * self.evaluation_periods > MAX_EVALUATED_SECONDS:
            raise InsightsError(f"Period x EvaluationPeriods = {self.period * self.evaluation_periods} s: only the last 3 hours are evaluated")
        if self.comparison not in _COMPARE:
            raise InsightsError(f"ComparisonOperator {self.comparison!r} is not one of {', '.join(_COMPARE)}")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], threshold: float | None = None) -> AlarmEvaluator:
        """From an AWS::CloudWatch::Alarm's resolved Properties (one Metrics entry with an Expression)."""
        (m,) = [m for m in props["Metrics"] if m.get("ReturnData", True)]
        return cls(parse(m["Expression"]), int(m["Period"]), float(threshold if threshold is not None else props["Threshold"]),
                   props["ComparisonOperator"], int(props.get("EvaluationPeriods", 1)),
                   int(props.get("DatapointsToAlarm", props.get("EvaluationPeriods", 1))), props.get("TreatMissingData", "missing"))

    @property
    def range_periods(self) -> int:
        """The periods each evaluation retrieves (the evaluation range), within the 3 hours a
        Metrics Insights alarm may evaluate."""
        return max(self.evaluation_periods, min(self.evaluation_periods + self.extra_range_periods,
                                                MAX_EVALUATED_SECONDS // self.period))

    def step(self, now: float, points: Iterable[Point]) -> AlarmState:
        """Evaluate at ``now`` over the evaluation range: the last :attr:`range_periods` whole periods."""
        end = now // self.period * self.period
        result = evaluate(self.query, points, end - self.period * self.range_periods, end, self.period)
        seen = {}
        for key, values in result.series.items():
            attrs = dict(zip(self.query.group_by, key, strict=True))
            verdict = judge(values, self.evaluation_periods, self.datapoints_to_alarm, self.treat_missing,
                            lambda v: _COMPARE[self.comparison](v, self.threshold))
            if verdict is None:  # nothing to judge (missing / ignore): keep the state it had
                seen[key] = self.contributors.get(key, Contributor(attrs, "OK", "no datapoints; state kept"))
                continue
            state, breaching, judged = verdict
            seen[key] = Contributor(attrs, state, f"{breaching} of {judged} datapoints breaching {self.threshold:g}")
        in_alarm = [k for k in seen if seen[k].state == "ALARM"]
        for k in in_alarm[MAX_CONTRIBUTORS_IN_ALARM:]:  # the cap: the rest are not put in ALARM
            seen[k] = Contributor(seen[k].attributes, "OK", "not evaluated to ALARM: 100 contributors already are")
        for key, old in self.contributors.items():
            if key not in seen:
                seen[key] = Contributor(old.attributes, "OK", NO_DATA_REASON)
        # a contributor notifies when its state changes; a new one starts OK (a series exists only with
        # data, and a contributor is only ALARM or OK), so a route first seen breaching notifies ALARM
        notes = [Notification("contributor", c.state, c.attributes) for k, c in seen.items()
                 if c.state != (self.contributors[k].state if k in self.contributors else "OK")]
        self.contributors = {k: v for k, v in seen.items() if k in result.series}  # a vanished one is reported once
        alarmed = any(c.state == "ALARM" for c in seen.values())
        overall = "ALARM" if alarmed else "OK" if result.series else "INSUFFICIENT_DATA"  # no series at all: INSUFFICIENT_DATA
        if overall != self.state and overall in ("ALARM", "OK"):  # AlarmActions / OKActions (no InsufficientDataActions here)
            notes.insert(0, Notification("alarm", overall))
        self.state = overall
        return AlarmState(overall, seen, "PARTIAL_DATA" if result.partial else "", notes)


def judge(values: Sequence[float | None], n: int, m: int, treat_missing: str,
          breaches: Callable[[float], bool]) -> tuple[str, int, int] | None:
    """One series' state over its evaluation range (``values``, oldest first; None: missing), as AWS
    documents it ("Configuring how CloudWatch alarms treat missing data", "How alarm state is
    evaluated when data is missing"): with at least ``n`` (EvaluationPeriods) real datapoints in the
    range, the ``n`` most recent real ones are judged and TreatMissingData "is not needed and is
    ignored"; with fewer, every real one is judged and the missing ones are filled in per
    TreatMissingData (``breaching``: breach, ``notBreaching``: within; ``missing`` / ``ignore``: not
    filled), as few as possible. ALARM when ``m`` (DatapointsToAlarm) of them breach. Returns (state,
    breaching, judged), or None when nothing can be judged (no real datapoint, missing / ignore).
    Not modelled: the page's "premature alarm state" rule for ``missing`` / ``ignore`` (every fleet
    alarm treats missing data as ``notBreaching``; tests/test_alarm_transcripts.py checks that).

    >>> judge([None, 50.0, 50.0, None, None], 1, 1, "notBreaching", lambda v: v > 10)  # the last real one
    ('ALARM', 1, 1)
    >>> judge([50.0, 50.0, None, None, 0.0], 1, 1, "notBreaching", lambda v: v > 10)
    ('OK', 0, 1)
    """
    real = [v for v in values if v is not None]
    if len(real) >= n:
        judged = real[-n:]
        fill = 0
    else:
        judged = real
        fill = n - len(real) if treat_missing in ("breaching", "notBreaching") else 0
        if not real and not fill:
            return None
    breaching = sum(1 for v in judged if breaches(v)) + (fill if treat_missing == "breaching" else 0)
    return ("ALARM" if breaching >= m else "OK"), breaching, len(judged) + fill


def template_alarms(template: dict[str, Any], parameters: Mapping[str, Any] | None = None) -> dict[str, AlarmEvaluator]:
    """Every Metrics Insights alarm a template creates with these parameters (defaults otherwise),
    by logical id, ready to :meth:`AlarmEvaluator.step` over the EMF a run printed."""
    from replmon.local.cfn import Resolver

    r = Resolver(template, parameters)
    return {name: AlarmEvaluator.from_properties(r.resolve(res["Properties"]))
            for name, res in template.get("Resources", {}).items()
            if res.get("Type") == "AWS::CloudWatch::Alarm" and "Metrics" in res.get("Properties", {}) and r.exists(name)}
