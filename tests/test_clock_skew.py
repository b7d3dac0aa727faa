"""The prober's clock against the server's ``Date`` header: warn past 30 s, refuse past S3's
15-minute limit, with the reason.

S3 refuses a signed request whose time is more than 15 minutes from its own with 403
RequestTimeTooSkewed ("The difference between the request time and the server's time is too large",
https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html, the list of error codes; AWS
"does not process a request if the request time stamp is more than 15 minutes" off its servers'
time: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/AboutTimestamp.html).
That 403 carries a Date header too, so the skew is measured even then: a local server answers as
S3 does, and botocore's own parsing gives the header to the adapter."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import boto3
import pytest
from botocore.config import Config

from replmon.adapters.serverclock import server_skew
from replmon.cli.common import CliError, clock_skew_faults
from replmon.core.route import Route
from replmon.core.skew import S3_MAX_SKEW_SECONDS, WARN_SECONDS, judge

SKEWED_BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>RequestTimeTooSkewed</Code>'
               b"<Message>The difference between the request time and the server's time is too large.</Message>"
               b"<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>")


@pytest.mark.parametrize(("off", "verdict"), [(0, "ok"), (29, "ok"), (-31, "warn"), (600, "warn"), (899, "warn"), (901, "refuse"),
                                              (-3600, "refuse")])
def test_the_skew_is_judged_against_30_s_and_s3s_15_minutes(off: float, verdict: str) -> None:
    server = 1_795_000_000.0
    s = judge(server + 0.5 + off, formatdate(server, usegmt=True), "the source")
    assert round(s.seconds, 3) == off and s.verdict == verdict
    assert WARN_SECONDS == 30 and S3_MAX_SKEW_SECONDS == 900
    if verdict == "refuse":
        assert "RequestTimeTooSkewed" in s.message() and "15 minutes" in s.message()


class _S3Answer(BaseHTTPRequestHandler):
    """HeadBucket as S3 answers it: 200, or 403 RequestTimeTooSkewed; always with a Date header."""

    server_offset = 0.0
    status = 200

    def do_HEAD(self) -> None:
        import time

        self.send_response_only(self.status)
        self.send_header("Date", formatdate(time.time() - self.server_offset, usegmt=True))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # every other call: 403 RequestTimeTooSkewed past 15 minutes, as S3 answers it
        import time

        skewed = self.server_offset > S3_MAX_SKEW_SECONDS
        body = SKEWED_BODY if skewed else b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"
        self.send_response_only(403 if skewed else 200)
        self.send_header("Date", formatdate(time.time() - self.server_offset, usegmt=True))
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None: ...


@pytest.fixture
def s3_like() -> Iterator[tuple[Any, type[_S3Answer]]]:
    handler = type("Answer", (_S3Answer,), {})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{httpd.server_port}", region_name="us-east-1",
                          aws_access_key_id="k", aws_secret_access_key="s",
                          config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))
    yield client, handler
    httpd.shutdown()


@pytest.mark.parametrize("status", [200, 403])
def test_the_date_header_is_read_from_any_answer(s3_like: tuple[Any, type[_S3Answer]], status: int) -> None:
    client, handler = s3_like
    handler.status, handler.server_offset = status, 600.0  # the server is 10 minutes behind us: we are ahead
    skew = server_skew(client, "bucket", "the source")
    assert skew is not None and 598 < skew.seconds < 602 and skew.verdict == "warn"


def test_a_run_warns_past_30_s_and_is_refused_past_15_minutes(s3_like: tuple[Any, type[_S3Answer]]) -> None:
    client, handler = s3_like

    class Store:
        control = client

    route = Route.model_validate({"name": "r", "source": {"bucket": "src-bucket", "endpoint_url": "http://127.0.0.1:1"},
                                  "destinations": [{"bucket": "dst-bucket", "endpoint_url": "http://127.0.0.1:1"}]})
    handler.server_offset = 600.0
    [line] = clock_skew_faults([route], lambda ep: Store())  # one endpoint, one line
    assert line.startswith("clock skew: this machine's clock is 600 s ahead of the source http://127.0.0.1:1's")
    handler.status, handler.server_offset = 403, 16 * 60.0
    with pytest.raises(CliError, match="RequestTimeTooSkewed") as refused:
        clock_skew_faults([route], lambda ep: Store())
    assert refused.value.code == 3
    handler.server_offset = 0.0
    assert clock_skew_faults([route], lambda ep: Store()) == []


def test_an_unreachable_server_has_no_skew_preflight_names_it() -> None:
    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1", aws_access_key_id="k",
                          aws_secret_access_key="s", config=Config(retries={"max_attempts": 1}, connect_timeout=1))
    assert server_skew(client, "bucket", "the source") is None


def test_report_warns_of_records_just_outside_its_window() -> None:
    """A prober 10 minutes ahead stamps records 10 minutes in the future: a report from a correct
    clock says NO DATA (exit 4) - and now also why, on stderr and in the JSON's faults."""
    import json

    from moto import mock_aws

    from replmon.adapters import clients
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.core.record import ProbeStatus
    from replmon.local.tables import ensure_table
    from tests.test_operator_cli import probe, report

    with mock_aws():
        client = clients.dynamodb(clients.STORE, region="us-east-1", keys=("testing", "testing"))
        ensure_table(client, "t")
        store = DynamoLatencyStore("t", client)
        from tests.test_operator_cli import NOW as t0  # the records' "now" (that module's import): each report's is later
        for i in range(3):
            store.put_once(probe("ahead", i, ProbeStatus.COMPLETED, 5.0, ago=-600 - i))  # dated 10 min after now
            store.put_once(probe("behind", 10 + i, ProbeStatus.COMPLETED, 5.0, ago=3600 + 600 + i))  # 10 min before a 1 h window
            store.put_once(probe("fine", 20 + i, ProbeStatus.COMPLETED, 5.0, ago=60 + i))
        ahead = report("t", "--route", "ahead", "--hours", "1", "--format", "json")
        assert ahead.returncode == 4 and "Traceback" not in ahead.stderr
        [line] = json.loads(ahead.stdout)["faults"]
        m = re.match(r"route ahead: 3 record\(s\) dated up to (\d+) s after now", line)
        assert m and 600 - (time.time() - t0) - 5 <= int(m.group(1)) <= 605 and "clock is ahead" in line
        assert line in " ".join(ahead.stderr.split())
        behind = report("t", "--route", "behind", "--hours", "1")
        m = re.search(r"route behind: no record in the window, but 3 dated (\d+) s before it", behind.stderr)
        assert behind.returncode == 4 and m and 595 <= int(m.group(1)) <= 605 + (time.time() - t0)
        fine = report("t", "--route", "fine", "--hours", "1", "--format", "json")
        assert fine.returncode == 0 and json.loads(fine.stdout)["faults"] == [] and "outside" not in fine.stderr


def test_probe_refuses_a_clock_past_s3s_15_minutes_with_the_reason(s3_like: tuple[Any, type[_S3Answer]], tmp_path: Any) -> None:
    """S3 answers every signed call RequestTimeTooSkewed: `replmon probe` says why, in one line, exit 3."""
    import os

    from tests.test_cli import cli

    client, handler = s3_like
    handler.status, handler.server_offset = 403, 20 * 60.0
    url = client.meta.endpoint_url
    r = cli("probe", "--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", url, "--dest-endpoint", url,
            "--dynamodb-endpoint", "http://127.0.0.1:9", "--format", "json",
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path), "REPLMON_ACCESS_KEY_ID": "k", "REPLMON_SECRET_ACCESS_KEY": "s"})
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 3 and r.stdout == "" and len(lines) == 1, r.stderr
    assert re.match(r"error: clock skew: this machine's clock is 1(19\d|20\d) s ahead of the source", lines[0]), lines[0]
    assert "RequestTimeTooSkewed" in lines[0]
