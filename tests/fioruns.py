"""The long real-fio runs tests/test_mounts.py checks, played in a process of their own from the
start of the session (``python -m tests.fioruns DIR``, started by tests/conftest.py's
``pytest_configure`` in the process that runs or distributes the tests).

They mostly wait: the knee logs' fios are rate-limited (two 5 s phases each), and a
mountpoint-xregion run at scale tiny is mostly fio's pauses between its stonewalled jobs (75
files of one 8 MiB block: ~0.1 s of reading in ~3 s). Started with the session, they are done
by the time a worker reaches the tests that read them (``wait``), instead of holding that worker
idle for ~7 s. A process, not threads of a test worker: other tests monkeypatch the runner
(``run_fio``, ``task_info``, ``Mounted``) and the environment, which threads of the same
process would see mid-run.

The layout test's two runs lay the files out (600 MB) and find them; the memory and entry point
runs then read that layout (each with its own run and output directories) side by side. Each
result is the run's value, or the exception it raised (the test that reads it re-raises it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: The directory of this session's runs, handed to the test workers (they inherit the environment).
ENV = "REPLMON_TEST_FIO_RUNS"
RESULTS = "results.pickle"
ROOT = Path(__file__).resolve().parents[1]
RUNNER_RUNS = ("layout", "memory", "entrypoint")
#: Two rate-limited phases of 5 s each, one fio job per phase (stonewalled). fio logs a 5 s job's
#: first 4 seconds (log_avg_msec=1000); the knee's running median (2 * MIN_SEGMENT + 1 = 7 samples)
#: needs 4 before the step to put the knee at it (with 3 the window around the third already holds
#: 3 of each, and at_s comes out a second early): a 5 s phase is the shortest the tests' bounds allow.
BW_LOG_PHASES = {"throttled": (["--rate=8m"], ["--rate=2m"]), "flat": (["--rate=4m"], ["--rate=4m"])}


def bw_log_samples(tmp: Path, *jobs: list[str]) -> list[Any]:
    from replmon.mounts import knee

    args = []
    for n, job in enumerate(jobs):
        # 64 MiB a job: 5 s at 8 MiB/s never reaches its end (fio allocates the whole file up front: 1G took 2 GiB of disk)
        args += [f"--name=j{n}", "--rw=write", "--bs=64k", "--size=64M", "--time_based", "--runtime=5", "--ioengine=psync",
                 f"--write_bw_log={tmp}/log{n}", "--log_avg_msec=1000", "--log_unix_epoch=1", *job]
        if n:
            args.append("--stonewall")
    out = subprocess.run(["fio", f"--directory={tmp}", "--output-format=json", *args], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"fio exited {out.returncode}: {out.stderr.strip()}")
    return [s for log in sorted(tmp.glob("log*_bw.*.log")) for s in knee.read_bw_log(log.read_text(), log.name)]


def xregion_target(mount_point: Path) -> Any:
    from replmon.mounts.targets import Target

    mount_point.mkdir(exist_ok=True)
    return Target.from_json({"name": "dir", "kind": "local", "mount_point": str(mount_point)})


def layout_runs(tmp: Path) -> tuple[Any, Any]:
    """Two runs on one target, one after the other: the first lays the files out, the second finds them."""
    from replmon.mounts.runner import DirSink, run

    target = xregion_target(mount_of(tmp.parent))
    first = run(target, "mountpoint-xregion", "tiny", DirSink(str(tmp / "out")), workdir=str(tmp))
    second = run(target, "mountpoint-xregion", "tiny", DirSink(str(tmp / "out")), workdir=str(tmp))
    return first, second


def memory_run(tmp: Path) -> Any:
    from replmon.mounts.runner import DirSink, run

    return run(xregion_target(mount_of(tmp.parent)), "mountpoint-xregion", "tiny", DirSink(str(tmp / "out")), workdir=str(tmp),
               memory=(100 * 2**20, "a 100 MiB test limit"))  # tiny files: one 8 MiB block in flight per thread


def mount_of(directory: Path) -> Path:
    """The one laid-out directory the runner's runs share (under the layout run's directory)."""
    return directory / "layout" / "m"


def entrypoint_env(tmp: Path, mount: Path) -> dict[str, str]:
    """Two targets, a with its own scale, b with the task's, on one laid-out directory (what is
    tested is the order and the task summary, not the layout)."""
    m = str(mount)
    targets = [{"name": "a", "kind": "local", "mount_point": m, "preset": "mountpoint-xregion", "scale": "tiny"},
               {"name": "b", "kind": "local", "mount_point": m, "preset": "mountpoint-xregion"}]
    return {"REPLMON_FIO_TARGETS": json.dumps(targets), "REPLMON_FIO_SCALE": "tiny", "REPLMON_FIO_RESULTS": str(tmp / "out"),
            "REPLMON_FIO_LOCK": str(tmp / "lock")}


def entrypoint_run(tmp: Path) -> int:
    """The container's entry point, ``main()``, with its environment (this process's own)."""
    from replmon.mounts.runner import main

    os.environ.update(entrypoint_env(tmp, mount_of(tmp.parent)))
    return main()


def play(directory: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def keep(name: str, go: Any, *args: Any) -> None:
        try:
            out[name] = go(*args)
        except Exception as exc:  # handed to the test that reads it, with where it came from
            out[name] = RuntimeError(f"{name}: {exc!r}\n{traceback.format_exc()}")

    dirs = {name: directory / name for name in (*BW_LOG_PHASES, *RUNNER_RUNS)}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()), ThreadPoolExecutor(max_workers=len(BW_LOG_PHASES) + 1) as pool:  # main() prints its rows
        for name, jobs in BW_LOG_PHASES.items():
            pool.submit(keep, name, bw_log_samples, dirs[name], *jobs)
        keep("layout", layout_runs, dirs["layout"])
        with ThreadPoolExecutor(max_workers=2) as runners:
            runners.submit(keep, "memory", memory_run, dirs["memory"])
            runners.submit(keep, "entrypoint", entrypoint_run, dirs["entrypoint"])
    return out


#: The tests that read the runs (tests/test_mounts.py): a session that selects none of them starts none.
READERS = ("test_knee_is_found_in_a_real_fio_log_with_a_throttled_phase", "test_a_flat_real_fio_log_has_no_knee",
           "test_runner_keeps_the_layout_between_runs_and_removes_its_own_files",
           "test_runner_skips_what_memory_cannot_hold_and_records_why",
           "test_the_entrypoint_runs_its_targets_in_order_and_writes_the_task_summary")


def wanted(args: list[str], markexpr: str = "", root: Path = ROOT, cwd: Path = ROOT) -> bool:
    """Whether a session on these paths (as given, from ``cwd``) and this marker expression runs
    the tests that read the runs (they carry no marker: ``-m lab`` selects none of them), and fio
    is here to run them. A session it cannot judge (``-k``, other node ids) does not start them:
    the tests' fixture runs them itself if they are reached."""
    from _pytest.mark.expression import Expression

    def unmarked(name: str, /, **kwargs: str | int | bool | None) -> bool:
        return False

    if shutil.which("fio") is None or (markexpr and not Expression.compile(markexpr).evaluate(unmarked)):
        return False
    module = root / "tests" / "test_mounts.py"
    for arg in args:
        path, _, node = arg.partition("::")
        resolved = (cwd / path).resolve()
        if (resolved == module and (not node or node.split("[")[0] in READERS)) or (not node and resolved in module.parents):
            return True
    return False


def start() -> tuple[subprocess.Popen[bytes], Path]:
    """The runs, in a process group of their own (``stop`` ends fio's processes with it)."""
    directory = Path(tempfile.mkdtemp(prefix="replmon-fio-runs-"))
    with open(directory / "stderr.txt", "wb") as err:
        child = subprocess.Popen([sys.executable, "-m", "tests.fioruns", str(directory), str(os.getpid())], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    (directory / "pid").write_text(str(child.pid))
    return child, directory


def stop(child: subprocess.Popen[bytes], directory: Path) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # the child, its threads' fio processes and theirs
    child.wait()
    shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True  # a PermissionError too: the process exists


def wait(directory: Path, timeout: float = 600.0) -> dict[str, Any]:
    """The runs' results, once the process has written them (whole: a rename); an error at once
    if it ended without them."""
    deadline = time.monotonic() + timeout
    results, pid = directory / RESULTS, int((directory / "pid").read_text())
    stderr = directory / "stderr.txt"
    while not results.exists():
        if not _alive(pid) and not results.exists():  # it may have written them just before it ended
            raise RuntimeError(f"the fio runs' process ended without results: {stderr.read_text(errors='replace')[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the fio runs in {directory} wrote no results in {timeout} s: {stderr.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    loaded: dict[str, Any] = pickle.loads(results.read_bytes())
    return {**loaded, "dirs": {name: directory / name for name in (*BW_LOG_PHASES, *RUNNER_RUNS)}}


def _exit_with_parent(parent: int) -> None:
    """A session that dies without its unconfigure (killed) must not leave the runs going."""
    while os.getppid() == parent:
        time.sleep(1)
    os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    threading.Thread(target=_exit_with_parent, args=(int(sys.argv[2]),), daemon=True).start()
    try:
        got = play(target)
        payload = pickle.dumps(got)
    except Exception:  # every test that reads the runs fails with it
        failure = RuntimeError(traceback.format_exc())
        payload = pickle.dumps(dict.fromkeys((*BW_LOG_PHASES, *RUNNER_RUNS), failure))
    tmp = target / (RESULTS + ".tmp")
    tmp.write_bytes(payload)
    tmp.rename(target / RESULTS)
