"""`lab bench-collector`'s loading and wiring (lab/collectorbench.py): a read timeout while loading is
retried with backoff, a DynamoDB Local that stays down is a clear error (LabError: the CLI prints it,
no traceback), unprocessed items are sent again; the handler gets template.yaml's environment."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from replmon.lab import collectorbench
from replmon.lab.servers import LabError


class FlakyClient:
    def __init__(self, fail_first: int, unprocessed_once: bool = False) -> None:
        self.fail_first, self.unprocessed_once = fail_first, unprocessed_once
        self.calls = 0
        self.written: list[dict[str, Any]] = []

    def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise ReadTimeoutError(endpoint_url="http://127.0.0.1:8000")
        [(table, requests)] = RequestItems.items()
        if self.unprocessed_once:
            self.unprocessed_once = False
            self.written += requests[1:]
            return {"UnprocessedItems": {table: requests[:1]}}
        self.written += requests
        return {}


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collectorbench.time, "sleep", lambda _: None)


def items(n: int) -> list[dict[str, Any]]:
    return [{"route": "r#roll", "at": f"h#{i:04d}", "j": 1} for i in range(n)]


def test_a_read_timeout_while_loading_is_retried_and_unprocessed_items_are_sent_again() -> None:
    client = FlakyClient(fail_first=3, unprocessed_once=True)
    collectorbench.load(client, "t", items(60), threads=1)
    assert sorted(r["PutRequest"]["Item"]["at"]["S"] for r in client.written) == [f"h#{i:04d}" for i in range(60)]


def test_a_dynamodb_local_that_stays_down_is_a_clear_error_not_a_traceback() -> None:
    client = FlakyClient(fail_first=10**6)
    with pytest.raises(LabError, match=r"loading the bench's items \(BatchWriteItem\): ReadTimeoutError.*after 8 attempts.*--routes"):
        collectorbench.load(client, "t", items(5), threads=1)


def test_the_handler_gets_the_templates_environment_with_the_labs_table_and_endpoint() -> None:
    env = collectorbench.function_environment("CollectSignals", "lab-table", "http://127.0.0.1:8000")
    assert env["REPLMON_TABLE"] == "lab-table" and env["REPLMON_DYNAMODB_ENDPOINT"] == "http://127.0.0.1:8000"
    assert env["REPLMON_READ_RTC"] == "true"  # the template's: the RTC reads are made (to the bench's stand-in)
    assert '"route_groups"' in env["REPLMON_FLEET"] and "threshold_seconds" in env["REPLMON_SLO"]
    assert not any(k.startswith("REPLMON_SPOOL") for k in env)


def test_what_is_loaded_holds_every_hour_item_a_run_reads() -> None:
    """The newest hours (the read hours, the one folded next) and the oldest (a lost cache's catch-up start)."""
    from replmon.signals.collector import CATCH_UP_HOURS
    from replmon.signals.slo_rollup import READ_HOURS

    now = 1_795_430_000.0
    hours = sorted(str(i["at"]) for i in collectorbench.history_items("r", now, days=collectorbench.COLD_HOURS / 24, record_hours=2)
                   if str(i["at"]).startswith("h#"))
    kept = [h for h in hours if collectorbench._kept({"at": h}, now)]
    assert kept[-(READ_HOURS + 1):] == hours[-(READ_HOURS + 1):] and kept[:CATCH_UP_HOURS] == hours[:CATCH_UP_HOURS]
    assert len(kept) == 2 * collectorbench.KEEP_HOURS
