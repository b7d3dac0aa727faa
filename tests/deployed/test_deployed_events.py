"""(c) An S3 replication failure event from a route's bucket: the page docs/ALARMS.md promises
(ReplicationFailedEvent notifies nobody; RpoUnbounded's contributor for the route pages through the
FleetPagesG00Rule EventBridge rule, naming the route)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deployed.scenario import ROUTE, deployed

pytestmark = pytest.mark.deployed
KEY = "data/2026/11/26/part-0001.parquet"


@pytest.fixture(scope="module")
def events() -> Iterator[dict[str, Any]]:
    """A failure event from the member route's source bucket and one from the stack's own, handed to
    IngestEvents as Lambda's SQS poller would; then the collector's next run and the alarms' period."""
    with deployed() as stack:
        stack.advance(minutes=1)
        sent = stack.clock.now()
        stack.s3_event(ROUTE, "replication_failed", KEY)
        stack.s3_event(str(stack.resolver.ref("DemoSourceBucket")), "replication_failed", KEY)
        stack.advance(minutes=10)  # the collector's next run, then the alarm's 5-minute period ends
        yield {"stack": stack, "sent": sent}


def test_c_a_failure_event_from_the_member_bucket_pages_naming_its_route(events: dict[str, Any]) -> None:
    """The member bucket's event is filed under its registry route; the collector reports its RPO
    unbounded; RpoUnbounded's contributor for it goes to ALARM and the FleetPages rule pages, once."""
    stack = events["stack"]
    assert stack.points("ReplicationEvents", Route=ROUTE, Event="OperationFailedReplication")
    pages = [n for n in stack.pages(naming=ROUTE, since=events["sent"]) if n.state == "ALARM"]
    assert [n.source for n in pages] == ["alarm:RpoUnboundedG00Alarm"], [(n.source, n.state) for n in stack.notifications]
    assert json.loads(pages[0].message)["detail"]["alarmContributor"]["attributes"]["Route"] == ROUTE
    assert stack.alarm_state("RpoUnboundedG00Alarm", ROUTE) == "ALARM"


def test_c_a_failure_event_from_the_stacks_own_bucket_pages_naming_its_route(events: dict[str, Any]) -> None:
    """The stack's own route (the StackRoute registry item, "primary") through the same handlers:
    the event is counted under it, the collector reports an unbounded RPO, RpoUnbounded pages naming it."""
    stack = events["stack"]
    assert stack.points("ReplicationEvents", Route="primary", Event="OperationFailedReplication")
    pages = [n for n in stack.pages(naming="primary", since=events["sent"]) if n.state == "ALARM"]
    assert [n.source for n in pages] == ["alarm:RpoUnboundedG00Alarm"], [(n.source, n.state) for n in stack.notifications]
    assert stack.alarm_state("RpoUnboundedG00Alarm", "primary") == "ALARM"
