"""Figures in the README are the code's: the bench pages and the README's bench blocks are rendered
from the bench's JSON (docs/bench/*.json), and the cost table is what `replmon cost` computes today."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", text, re.S)
    assert m, f"README has no {name} block"
    return m.group(1)


def test_the_readme_cost_block_is_what_replmon_cost_computes() -> None:
    """One route's month and a fleet's, as tools/render_cost_block.py renders `replmon cost --routes` now; and
    every dollar figure in the block is in that command's own output."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_cost_block", ROOT / "tools" / "render_cost_block.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    doc = tool.cost(tool.ARGS)
    readme = (ROOT / "README.md").read_text()
    assert "<!-- cost:start -->" + block(readme, "cost") + "<!-- cost:end -->" == tool.block(doc), \
        "README.md's cost block is stale: python tools/render_cost_block.py --write"
    out = subprocess.run([sys.executable, "-m", "replmon.cli", "cost", "--format", "csv", *tool.ARGS], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    dollars = [n for n in NUMBER.findall(block(readme, "cost")) if "." in n and not n.startswith("2026")]
    printed = {round(float(n), 2) for n in NUMBER.findall(out.stdout)}  # the block rounds to cents
    assert len(dollars) >= 6 and [n for n in dollars[:6] if float(n.replace(",", "")) not in printed] == []
    assert len(doc["fleet"]) == 2 and doc["fleet"][0]["routes"] == 1 and doc["fleet"][1]["routes"] > 1  # one route, one fleet


def test_docs_cite_the_projects_own_references() -> None:
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "src" / "replmon" / "probe" / "ladders.json"]:
        assert "field-notes" not in path.read_text(), path
    refs = (ROOT / "docs" / "REFERENCES.md").read_text()
    for r in range(1, 19):
        assert f"## R{r}." in refs


def test_the_architecture_page_names_files_that_exist() -> None:
    """docs/ARCHITECTURE.md draws each data path file by file: every file it names is there."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|json|yaml))\b", text))
    assert len(named) > 40
    files = {n for n in named if "/" in n or n.endswith(".py")}  # "run.json" is the runner's output, not a file here
    missing = sorted(n for n in files if not ((ROOT / n).exists() or (ROOT / "src" / "replmon" / n).exists()))
    assert missing == []


def test_the_fleet_design_page_names_files_that_exist() -> None:
    """docs/design/fleet.md holds the fleet's design facts with the file that implements each: every
    file it names is there (under src/replmon/ or the checkout)."""
    text = (ROOT / "docs" / "design" / "fleet.md").read_text()
    named = set(re.findall(r"`((?:[\w-]+/)*[\w-]+\.(?:py|yaml|md))`", text))
    assert len(named) > 20
    assert sorted(n for n in named if not ((ROOT / n).exists() or (ROOT / "src" / "replmon" / n).exists())) == []


#: (the JSON's report name, its page under docs/, its summary block's name; the block's file: benchreport.BLOCK_FILES)
BENCH_REPORTS = [("bench", "BENCH.md", "bench"), ("bench-mounts", "BENCH-MOUNTS.md", "benchmounts"),
                 ("bench-stall", "BENCH-STALL.md", "benchstall"), ("bench-fleet", "BENCH-FLEET.md", "benchfleet"),
                 ("bench-collector", "BENCH-COLLECTOR.md", "benchcollector")]


@functools.cache
def rendered_block(report: str) -> str:
    from replmon.lab import benchreport

    return "\n" + benchreport.README_BLOCKS[report](benchreport.load(report))


def readme_block_is_rendered(readme: str, report: str, name: str) -> bool:
    """The summary block for ``report`` (in README.md or a docs page) is byte for byte what the renderer makes of the JSON."""
    return block(readme, name) == rendered_block(report)


def block_file(report: str) -> Path:
    from replmon.lab import benchreport

    return ROOT / benchreport.BLOCK_FILES[report]


@pytest.mark.parametrize(("report", "page", "name"), BENCH_REPORTS)
def test_each_bench_page_and_readme_block_is_rendered_from_its_json(report: str, page: str, name: str) -> None:
    """docs/bench/<report>.json is the single source. The page (header, every table, every
    sentence with a figure) and the README's block are byte for byte what lab/benchreport.py renders
    from it (`python -m replmon.lab.benchreport` re-renders them)."""
    from replmon.lab import benchreport

    doc = benchreport.load(report)
    assert (ROOT / "docs" / page).read_text() == benchreport.render(doc), f"docs/{page} is not rendered from docs/bench/{report}.json"
    assert readme_block_is_rendered(block_file(report).read_text(), report, name), \
        f"{block_file(report).name}'s {name} block is not rendered from docs/bench/{report}.json"


@pytest.mark.parametrize(("report", "page", "name"), BENCH_REPORTS)
def test_a_one_digit_edit_anywhere_in_a_readme_bench_block_fails(report: str, page: str, name: str) -> None:
    """The mutation test of the README bench blocks (a number-anywhere check let 26 of 84 one-digit changes pass):
    every digit in the README block (so every digit of every number), changed alone, fails the check
    the test above makes - and the unchanged README passes it."""
    readme = block_file(report).read_text()
    text = block(readme, name)
    start = readme.index(text)
    assert len(NUMBER.findall(text)) >= (10 if report == "bench-collector" else 15)  # the collector's block: one N, three phases
    assert readme_block_is_rendered(readme, report, name)
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    for i in digits:  # also those inside "16MiB", "0.971x", a date or the commit
        mutant = readme[:start + i] + str((int(text[i]) + 1) % 10) + readme[start + i + 1:]
        assert not readme_block_is_rendered(mutant, report, name), f"a changed digit passes: {text[max(0, i - 20):i + 20]!r}"
    assert len(digits) >= (30 if report == "bench-collector" else 40)


@pytest.mark.parametrize(("report", "page", "name"), BENCH_REPORTS)
def test_each_bench_json_records_what_it_measured_and_repeats_the_swinging_figures(report: str, page: str, name: str) -> None:
    """The facts are asked, not typed: the commit (git rev-parse) and whether the tree differed, the
    machine (cores, CPU, architecture, Python) and its load average at the start and the end, the
    tool versions each asked of its binary or module. Timing figures come in >= 3 repetitions."""
    from replmon.lab import benchreport

    doc = benchreport.load(report)
    assert doc["schema"] == benchreport.SCHEMA and doc["report"] == report
    f = doc["facts"]
    assert re.fullmatch(r"[0-9a-f]{40}", f["commit"]["sha"]) and isinstance(f["commit"]["dirty"], bool)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", f["date"])
    assert isinstance(f["machine"]["cores"], int) and f["machine"]["architecture"] and f["machine"]["python"].startswith("CPython 3.")
    assert all(len(f[k]) == 3 and all(isinstance(x, float | int) for x in f[k]) for k in ("load_average_start", "load_average_end"))
    assert f["versions"]["python"] and "not available" not in json.dumps(f["versions"])
    if report == "bench":
        assert len(doc["P3"]["compose_s"]) >= 3 and len(doc["P3"]["upload_file_s"]) >= 3
        assert all(len(t[k]) >= 3 for t in doc["P5"]["imports_ms"].values() for k in ("false", "true"))
        assert doc["P5"]["architecture"] and doc["P5"]["python"]
    elif report == "bench-stall":  # >= 5 faults, >= 60 healthy periods, the defaults simulated
        st = doc["stall"]
        assert len(st["repetitions"]) >= 5 and all(r["stalled_s"] is not None for r in st["repetitions"])
        assert st["healthy"]["periods"] >= 60 and len(st["simulated"]["defaults"]["stalled_s"]) >= 100
        assert {"minio", "toxiproxy-server", "dynamodb-local"} <= set(f["versions"])
    elif report == "bench-fleet":  # a lab fleet of >= 20 routes, >= 3 faults, each run's facts
        from replmon.lab.fleetlab import named_only

        fl = doc["fleet"]
        assert fl["routes"] >= 20 and len(fl["repetitions"]) >= 3
        assert all(r["contributors"] == fl["routes"] and isinstance(named_only(r), bool) for r in fl["repetitions"])
        assert {"minio", "toxiproxy-server", "dynamodb-local"} <= set(f["versions"])
    elif report == "bench-collector":  # the CollectSignals handler at N >= 1,000: steady (>= 2 runs), after a late write, cold
        c = doc["collector"]
        phases = [r["phase"] for r in c["runs"]]
        assert c["routes"] >= 1000 and phases.count("steady") >= 2 and {"late", "cold"} <= set(phases), phases
        assert all(r["routes_evaluated"] >= c["routes"] and r["items_read_per_route"]["max"] >= 1 for r in c["runs"])
        assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 and r["metric_queries"] <= 500 * r["get_metric_data_calls"] for r in c["runs"])
        assert "dynamodb-local" in f["versions"]
    else:
        assert {"fio", "s3fs", "mountpoint"} <= set(f["versions"])
        assert len(doc["M1"]["reps"]) >= 3 and len(doc["M2"]["reps"]) >= 3


def test_the_renderer_gives_min_median_max_and_replaces_only_its_block() -> None:
    from replmon.lab.benchreport import mmm, with_block

    assert mmm([3.0, 1.0, 2.0, 10.0], ".1f") == ["1.0", "2.5", "10.0"]
    assert mmm([]) == ["-", "-", "-"]
    text = "a\n<!-- x:start -->\nold 1\n<!-- x:end -->\n<!-- y:start -->\nkeep 2\n<!-- y:end -->\n"
    assert with_block(text, "x", "new 3\n") == text.replace("old 1", "new 3")
    with pytest.raises(ValueError, match="no z block"):
        with_block(text, "z", "")


def test_the_readme_demo_block_is_what_the_demo_prints_now() -> None:
    """The README's `make demo` output is the current output's shape: the headline first, then the
    table with the columns `summary_rows` gives at the default width (a stale 14-column table, or a
    block without the answer first, fails here)."""
    from replmon.cli.render import summary_rows

    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- demo:start -->.*?```\n(.*?)```", text, re.S)
    assert m, "README has no demo block"
    lines = m.group(1).splitlines()
    assert re.match(r"^(OK|BREACH|NOT MEASURED|NO DATA) route lab: RPO now ", lines[0]), lines[0]
    header = next(ln for ln in lines if ln.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == summary_rows([], {}, wide=False)[1]
    assert any(re.match(r"^chart: lab-data/runs/\d{8}T\d{6}Z-[0-9a-f]+-latency-vs-size\.png$", ln) for ln in lines)


def test_the_readme_gives_one_test_fast_figure_and_says_how_it_was_measured() -> None:
    """The one place that gives `make test-fast`'s time carries the figure tools/time_test_fast.py wrote
    (one measurement of a commit in this history, with its date, machine and load), and it meets
    the bound the Makefile's help states (at most 3 minutes on 2 cores; it was under a minute before
    the suite grew to some 1,400 tests without a lab server)."""
    blocks = re.findall(r"<!-- test-fast:start -->(.*?)<!-- test-fast:end -->", (ROOT / "README.md").read_text(), re.S)
    assert len(blocks) == 1, blocks
    m = re.fullmatch(r"measured by `tools/time_test_fast.py` at ([0-9a-f]{7})( plus uncommitted changes)? on \d{4}-\d\d-\d\d \d\d:\d\d UTC, "
                     r"on this machine \((\d+) cores, [^;?]+; load [\d.]+ at the start\), 3 runs one after another \((compiled modules "
                     r"already written|the first run compiled the modules): a fresh clone's first run compiles them\): \d+ tests passed in (\d+) s wall \(median; min \d+, "
                     r"max \d+\), \d+ s of CPU \(user\+sys, median\)", blocks[0])
    assert m, blocks[0]
    if (ROOT / ".git").exists():  # a checkout (not an unpacked sdist): the measured commit is in its history
        ancestor = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", m.group(1), "HEAD"], capture_output=True)
        assert ancestor.returncode == 0, (m.group(1), ancestor.stderr)
    assert not m.group(2), "measure a commit, not a working tree"
    assert int(m.group(3)) == 2 and int(m.group(5)) <= 180, "make test-fast's bound: at most 3 minutes on 2 cores"


#: What a reader of this repository cannot follow: design notes kept outside it and numbered
#: tracker items (an issue's number, a contract's "C" number, a work package's letter). Patterns
#: and examples are split so that this file does not match itself. CHANGELOG.md is a history and
#: may name issues.
OUTSIDE_NOTES = ("fleet-" + "design", "fleet-" + "contracts", "design-" + "changes", "aws-" + "contracts", "/work/" + "notes")
CITATION = re.compile("|".join([*map(re.escape, OUTSIDE_NOTES), r"\b[Ii]ssues? ?#?[0-9]", r"\bC[0-9]{2}\.[0-9]+", r"\b[Pp]ackages? [A-D]\b"]))
CITING_TREES = ("src", "tests", "templates", "statemachines", "docs", "functions", "tools", "scripts")
CITING_FILES = ("template.yaml", "README.md", "Makefile")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".toml", ".sh", ".mjs", ".txt", ".cfg", ".ini", ""}


def cited_outside(root: Path) -> list[str]:
    """Every line under ``root`` that cites an outside note or an issue number, as ``path:line: text``."""
    paths = [root / f for f in CITING_FILES]
    for tree in CITING_TREES:
        paths += sorted(p for p in (root / tree).rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                        and not any(part.endswith(".egg-info") or part == "__pycache__" for part in p.parts))
    found = []
    for path in paths:
        if not path.is_file() or path.name == "CHANGELOG.md":
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()[:120]}")
    return found


@pytest.mark.parametrize("line, cites", [
    ("# a heartbeat (issue" + " 21.2) is late", True), ("(issues" + " 18/19/21; see the notes)", True),
    ("(Issue" + " #7)", True), ("TTL deletes within two days (C19" + ".23)", True), ("see fleet-" + "design.md 4.5", True),
    ("/work/" + "notes/design-" + "changes.md", True), ("(aws-" + "contracts.md M.6)", True),
    ("https://github.com/awslabs/mountpoint-s3/issues/450", False), ("every issue the route has", False),
    ("(packages" + " A, B, C)", True), ("(docs/design/fleet.md 7)", False), ("CRC64NVME, ClassSpec", False),
    ("a Python package: a wheel", False),
])
def test_the_citation_pattern_tells_an_outside_citation(line: str, cites: bool) -> None:
    assert bool(CITATION.search(line)) is cites


def test_comments_and_docs_cite_only_what_is_in_the_repository(tmp_path: Path) -> None:
    """A newcomer can follow every reference: a reason is said where it is needed, or points at a file
    of this repository (docs/design/fleet.md holds the fleet's design). The scan itself is checked on a
    planted file, so an empty result means the tree is clean, not that nothing was read."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1  # why: see issue" + " 7\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "CHANGELOG.md").write_text("- issue" + " 7 fixed\n")  # a history may name issues
    assert cited_outside(tmp_path) == ["src/m.py:1: x = 1  # why: see issue" + " 7"]
    assert cited_outside(ROOT) == []
