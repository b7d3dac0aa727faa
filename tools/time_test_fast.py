"""Time `make test-fast` and write the figure into README.md (the one place that gives it: "Two commands"), between
``<!-- test-fast:start -->`` and ``<!-- test-fast:end -->``.

    python tools/time_test_fast.py           # run it, print the figure, write nothing
    python tools/time_test_fast.py --write   # run it and rewrite the README's blocks

The figure says what it measured: wall time of the make target over three runs (median, min,
max; a venv and node_modules already installed, fio already there), CPU of every process it
started (user + system, from the kernel's accounting of this process's children), the tests
pytest reports passed, the commit, this machine (asked of the OS) and the load average at the
start (other work slows every timed figure).
tests/test_docs.py checks that the README block is in this form.
"""

from __future__ import annotations

import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- test-fast:start -->)(.*?)(<!-- test-fast:end -->)", re.S)


RUNS = 3


def one_run() -> tuple[float, float, str]:
    """(wall s, CPU s of every process it started, the tests pytest says passed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    run = subprocess.run(["make", "--no-print-directory", "test-fast"], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.exit(f"make test-fast failed (exit {run.returncode}); nothing written:\n{run.stdout[-3000:]}{run.stderr[-2000:]}")
    passed = re.findall(r"(\d+) passed", run.stdout)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), passed[-1] if passed else "?"


def measure() -> str:
    from replmon.lab.benchreport import commit, load_average, machine

    at, head, host, load = datetime.now(UTC), commit(), machine(), load_average()
    warm = any((ROOT / "src" / "replmon").glob("__pycache__/*.pyc")) and any((ROOT / "tests").glob("__pycache__/*pytest*.pyc"))
    runs = [one_run() for _ in range(RUNS)]
    walls, cpus = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
    sha = (head["sha"] or "?")[:7] + (" plus uncommitted changes" if head["dirty"] else "")
    return (f"measured by `tools/time_test_fast.py` at {sha} on {at:%Y-%m-%d %H:%M} UTC, on this machine ({host['cores']} cores, "
            f"{host['cpu']}; load {load[0]} at the start), {RUNS} runs one after another "
            f"({'compiled modules already written' if warm else 'the first run compiled the modules'}: a fresh clone's first run "
            f"compiles them): {runs[-1][2]} tests passed in {statistics.median(walls):.0f} s wall "
            f"(median; min {walls[0]:.0f}, max {walls[-1]:.0f}), {statistics.median(cpus):.0f} s of CPU (user+sys, median)")


def main(argv: list[str]) -> int:
    figure = measure()
    print(figure)
    if "--write" in argv:
        text = README.read_text()
        if len(BLOCK.findall(text)) != 1:
            sys.exit("README.md: expected one <!-- test-fast:start --> ... <!-- test-fast:end --> blocks")
        README.write_text(BLOCK.sub(lambda m: m.group(1) + figure + m.group(3), text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
