"""Each invalid field gets an error that names it and the accepted form."""

from __future__ import annotations

import pytest

from replmon.core.errors import ConfigError
from replmon.core.sizes import SizeError, format_size, parse_size
from replmon.probe import ladders
from replmon.probe.request import load_request

GOOD_ROUTE = {"name": "primary", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}


def error_for(data: dict) -> str:
    with pytest.raises(ConfigError) as exc:
        load_request(data)
    return str(exc.value)


@pytest.mark.parametrize(
    ("patch", "field", "hint"),
    [
        ({"sizes": ["10QB"]}, "sizes:", "unknown size unit 'QB'"),
        ({"sizes": ["ten"]}, "sizes:", "a byte count (4096) or a number with a unit"),
        ({"sizes": [0]}, "sizes:", "at least 1 byte"),
        ({"sizes": ["6TiB"]}, "sizes:", "5 TiB object limit"),
        ({"sizes": []}, "sizes:", "preset name"),
        ({"sizes": "no-such-preset"}, "sizes:", "neither a preset (crr-ladder, lab-ladder, smoke) nor a size"),
        ({"trials": 0}, "trials:", "greater than or equal to 1"),
        ({"timeout_seconds": -5}, "timeout_seconds:", "greater than or equal to 1"),
        ({"target_seconds": 0}, "target_seconds:", "greater than 0"),
        ({"max_concurrency": 0}, "max_concurrency:", "greater than or equal to 1"),
        ({"poll": {"relative": 2}}, "poll.relative:", "less than or equal to 0.5"),
        ({"routes": []}, "routes:", "at least one route is required"),
        ({"routes": [GOOD_ROUTE, GOOD_ROUTE]}, "routes:", "route names must be unique"),
        ({"routes": [{**GOOD_ROUTE, "name": "has space"}]}, "routes.0.name:", "letters, digits"),
        ({"routes": [{**GOOD_ROUTE, "source": {"bucket": "Bad_Bucket"}}]}, "routes.0.source.bucket:", "S3 bucket name"),
        ({"routes": [{**GOOD_ROUTE, "source": {"bucket": "src-bucket", "region": "mars"}}]}, "routes.0.source.region:", "us-east-1"),
        ({"routes": [{**GOOD_ROUTE, "source": {"bucket": "src-bucket", "endpoint_url": "ftp://x"}}]}, "routes.0.source.endpoint_url:", "http(s) URL"),
        ({"routes": [{**GOOD_ROUTE, "destinations": []}]}, "routes.0.destinations:", "at least one destination"),
        ({"routes": [{**GOOD_ROUTE, "destinations": [{"bucket": "dst-bucket", "account": "12"}]}]}, "routes.0.destinations.0.account:", "12-digit"),
        ({"routes": [{**GOOD_ROUTE, "destinations": [{"bucket": "dst-bucket", "role_arn": "me"}]}]}, "routes.0.destinations.0.role_arn:", "IAM role ARN"),
        ({"routes": [{**GOOD_ROUTE, "prefix": "/abs"}]}, "routes.0.prefix:", "ending in '/'"),
        ({"sizez": ["1MiB"]}, "sizez:", "unknown field"),
    ],
)
def test_invalid_field_is_named_with_its_fix(patch: dict, field: str, hint: str) -> None:
    msg = error_for({"routes": [GOOD_ROUTE], **patch})
    line = next((ln for ln in msg.splitlines() if ln.strip().startswith(field)), None)
    assert line is not None, msg
    assert hint in line, line


def test_missing_routes_is_required() -> None:
    assert "routes: is required" in error_for({"sizes": ["1MiB"]})


def test_defaults_fill_what_the_input_omits() -> None:
    req = load_request({"sizes": "1MiB"}, defaults={"routes": [GOOD_ROUTE], "trials": 3})
    assert req.trials == 3 and req.timeout_seconds == 7200 and req.target_seconds == 900


def test_a_preset_brings_its_trials_unless_the_input_gives_them() -> None:
    deployed = {"routes": [GOOD_ROUTE], "trials": 1}
    assert load_request({"sizes": "crr-ladder"}, deployed).trials == ladders.ladder("crr-ladder").trials == 10
    assert load_request({"sizes": "crr-ladder"}, deployed).sizes == list(ladders.ladder("crr-ladder").sizes)
    assert load_request({"sizes": "crr-ladder", "trials": 2}, deployed).trials == 2
    # A preset named in the deployment's own defaults keeps the deployment's trials.
    assert load_request({}, {**deployed, "sizes": "crr-ladder"}).trials == 1


@pytest.mark.parametrize("field", ["target_seconds", "poll.floor_seconds"])
@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_infinite_or_nan_numbers_are_rejected(field: str, value: float) -> None:
    patch: dict = {"poll": {"floor_seconds": value}} if field.startswith("poll") else {field: value}
    assert "finite number" in error_for({"routes": [GOOD_ROUTE], **patch})


def test_inline_budget_must_fit_in_the_poll_functions_timeout() -> None:
    """One destination: the final HEAD and the replica's HEAD, 58 s in the worst case (test_clients)."""
    ok = load_request({"routes": [GOOD_ROUTE], "poll": {"inline_budget_seconds": 62}}, poll_function_timeout=120)
    assert ok.poll.inline_budget_seconds == 62
    with pytest.raises(ConfigError, match=r"poll.inline_budget_seconds: 63 s does not fit in PollReplication's 120 s timeout"):
        load_request({"routes": [GOOD_ROUTE], "poll": {"inline_budget_seconds": 63}}, poll_function_timeout=120)


def test_template_style_inputs_are_accepted() -> None:
    """The template passes sizes as one comma-separated string and an empty optional region."""
    route = {**GOOD_ROUTE, "destinations": [{"bucket": "dst-bucket", "region": ""}]}
    req = load_request({"routes": [route], "sizes": "1MiB, 64MiB,1GiB"})
    assert req.sizes == [2**20, 64 * 2**20, 2**30]
    assert req.routes[0].destinations[0].region is None


def test_crr_ladder_is_the_published_experiment() -> None:
    """docs/REFERENCES.md R1: 10M doubling to 80G, 14 sizes, 10 trials."""
    p = ladders.ladder("crr-ladder")
    assert len(p.sizes) == 14 and p.trials == 10
    assert [format_size(s) for s in (p.sizes[0], p.sizes[7], p.sizes[-1])] == ["10MiB", "1280MiB", "80GiB"]
    assert all(b == 2 * a for a, b in zip(p.sizes, p.sizes[1:], strict=False))


@pytest.mark.parametrize(("text", "n"), [("10MiB", 10 * 2**20), ("1GiB", 2**30), ("4096", 4096), (4096, 4096), ("1.5GB", 1_500_000_000), ("8M", 8 * 2**20)])
def test_parse_size(text: str | int, n: int) -> None:
    assert parse_size(text) == n


def test_parse_size_rejects_bools() -> None:
    with pytest.raises(SizeError):
        parse_size(True)  # type: ignore[arg-type]


def test_a_plan_too_large_for_one_execution_is_refused_with_the_fix() -> None:
    from replmon.probe.plan import plan_output

    ok = plan_output(load_request({"routes": [GOOD_ROUTE], "sizes": "crr-ladder", "trials": 10}), "run", 0.0)
    assert len(ok["probes"]) == 140  # the published experiment fits in one run
    routes = [{**GOOD_ROUTE, "name": f"r{i}"} for i in range(5)]
    with pytest.raises(ConfigError, match=r"trials: 700 probes .* lower trials, sizes or routes"):
        plan_output(load_request({"routes": routes, "sizes": "crr-ladder", "trials": 10}), "run", 0.0)
