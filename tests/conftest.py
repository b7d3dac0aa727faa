from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

import replmon.local.template as _template
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.leases import DynamoLeases
from replmon.core.clock import ManualClock
from replmon.local.tables import ensure_table
from replmon.wiring import Deps
from tests import fioruns
from tests.fakes import FakeReplication

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
SRC, DST, TABLE = "probe-source", "probe-replica", "replmon-latency"


def _parsed_once(load: Any) -> Any:
    """template.yaml parsed once per process (PyYAML's pure-Python loader takes ~0.5 s for it, and
    ~50 tests read it): cached by the file's text, each caller gets its own deep copy to mutate.
    Replaced in the module and wherever it was already imported by name; later imports get it."""
    import copy
    import functools

    cache: dict[str, Any] = {}

    @functools.wraps(load)
    def load_template(path: Path = _template.TEMPLATE) -> dict[str, Any]:
        text = Path(path).read_text()
        if text not in cache:
            cache[text] = load(path)
        return copy.deepcopy(cache[text])  # type: ignore[no-any-return]

    return load_template


def _install_template_cache() -> None:
    original = _template.load_template
    cached = _parsed_once(original)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("replmon") and getattr(module, "load_template", None) is original:
            module.load_template = cached  # type: ignore[attr-defined]


_install_template_cache()


def _install_command_cache() -> None:
    """typer builds replmon's click command from every function's signature on each call (~0.5 s:
    it evaluates each annotation); a process builds it once, and so do the tests that run the
    console entry in-process (test_cli, test_preflight, test_fleet_cli...): one build per worker."""
    import functools

    import typer.main

    typer.main.get_command = functools.cache(typer.main.get_command)


_install_command_cache()


def _share_botocore_data() -> None:
    """Every botocore session loads its own copy of botocore's data (endpoints.json, each
    service's model: ~0.1 s of JSON a session), and moto resets boto3's default session at each
    mock: tests build hundreds of sessions. One loader per data path serves them all (the data is
    botocore's own files, read only); what a client does is unchanged."""
    import functools

    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)  # type: ignore[attr-defined]
    import boto3.session

    setup = boto3.session.Session._setup_loader

    def setup_once(self: Any) -> None:  # each boto3 session adds its data path to the loader: once is enough
        setup(self)
        paths = self._loader.search_paths
        paths[:] = list(dict.fromkeys(paths))

    boto3.session.Session._setup_loader = setup_once  # type: ignore[method-assign]


_share_botocore_data()


def _s3_objects_in_memory() -> None:
    """moto keeps an object's bytes in memory up to 5 MiB, then in a temporary file: the probes'
    12-40 MiB objects and their parts went to disk (the contract run: 4.2 -> 2.7 s of system time).
    In memory up to 256 MiB (no test writes a larger object); what S3 answers is unchanged. Patched,
    not MOTO_S3_DEFAULT_KEY_BUFFER_SIZE: the handlers run with their function's environment only."""
    import moto.s3.models

    moto.s3.models.get_s3_default_key_buffer_size = lambda: 256 * 2**20  # type: ignore[attr-defined]



def _parse_each_definition_once() -> None:
    """moto's interpreter parses the ASL with ANTLR at CreateStateMachine and again at every
    execution (kept: 1.7 s of CPU fewer over the four state-machine test files, measured). The parse
    tree of a definition is kept; each call still builds its own program from it (the program's
    states carry an execution's state, the tree only the text's structure). A definition that
    does not parse is parsed (and refused) every time."""
    import threading

    from moto.stepfunctions.parser.asl.parse import asl_parser

    parse = asl_parser.AmazonStateLanguageParser.parse
    trees: dict[str, Any] = {}
    lock = threading.Lock()

    def parse_once(definition: str) -> tuple[Any, Any]:
        with lock:
            tree = trees.get(definition)
        if tree is None:
            program, tree = parse(definition)
            with lock:
                trees[definition] = tree
            return program, tree
        return asl_parser.Preprocessor().visit(tree), tree

    asl_parser.AmazonStateLanguageParser.parse = staticmethod(parse_once)  # type: ignore[method-assign]


def tool_module(name: str) -> Any:
    """tools/<name>.py as a module (the tools are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serialize_moto_transactions() -> None:
    """moto's DynamoDB backend keeps its tables in plain dicts, unlocked: a TransactWriteItems (which
    iterates its tables) or a Query beside a write from another emulated Lambda's thread (a Map of
    probes recording together) fails with "dictionary changed size during iteration", a RuntimeError
    DynamoDB never answers. DynamoDB serializes conflicting writes itself (a conflict is a
    TransactionConflict, which adapters/dynamodb.py retries): so every call of moto's DynamoDB
    backend takes one lock here (its calls never wait on anything, so nothing is held long)."""
    import functools
    import inspect
    import threading

    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()

    def serialized(original: Any) -> Any:
        @functools.wraps(original)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return original(self, *args, **kwargs)
        return call

    for name, member in inspect.getmembers(DynamoDBBackend, inspect.isfunction):
        if not name.startswith("_") and member.__qualname__.startswith("DynamoDBBackend."):
            setattr(DynamoDBBackend, name, serialized(member))


@pytest.fixture(autouse=True)
def _offline_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials: nothing here may reach AWS (moto intercepts; loopback is the lab's)."""
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")


def route(**over: Any) -> dict[str, Any]:
    r = {"name": "primary", "source": {"bucket": SRC}, "destinations": [{"bucket": DST}]}
    r.update(over)
    return r


def registry_of(*routes: dict[str, Any], groups: int = 1) -> Any:
    """An in-memory registry holding ``routes`` (core/route.py Route dicts) as the stack's own route
    is held (fleet/stack_route.py): the one list of routes every function reads."""
    from replmon.adapters.memregistry import MemoryRegistry
    from replmon.core.route import Route
    from replmon.fleet.stack_route import spec_of_route

    return MemoryRegistry([spec_of_route(Route.model_validate(r), groups=groups) for r in routes])


def make_buckets() -> Any:
    s3 = boto3.client("s3", region_name="us-east-1")
    for b in (SRC, DST):
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    return s3


def all_versions(s3: Any, bucket: str, prefix: str = "replmon-probes/") -> list[str]:
    r = s3.list_object_versions(Bucket=bucket, Prefix=prefix)
    return [v["Key"] for v in r.get("Versions", []) + r.get("DeleteMarkers", [])]


class Env:
    """Everything a state machine test needs, inside one mock_aws. Handlers get ``deps`` the one
    way tests replace dependencies: ``with wiring.injected(env.deps): ...``."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.s3 = make_buckets()
        self.ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(self.ddb, TABLE, TEMPLATE)
        self.fake = FakeReplication(clock, SRC, DST)
        self.store = DynamoLatencyStore(TABLE, self.ddb)
        self.leases = DynamoLeases(TABLE, self.ddb)
        self.published: list[Any] = []
        self.counted: list[tuple[str, float, dict[str, str]]] = []
        outer = self

        class Capture:
            def publish(self, record: Any) -> None:
                outer.published.append(record)

            def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
                outer.counted.append((metric, value, dict(dimensions or {})))

        self.deps = Deps(stores=self.fake.stores(), store=self.store, metrics=Capture(), clock=clock, leases=self.leases)


@pytest.fixture
def env() -> Iterator[Env]:
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        yield Env(ManualClock(start=1_790_000_000.0, tick=0.001))
    os.environ.pop("REPLMON_TABLE", None)


@pytest.fixture(scope="session")
def contract() -> Any:
    """The real state machine through every path, recorded once per session (tests/contract.py).
    The mock is closed before the results (plain data) are handed to the tests."""
    from moto import mock_aws

    from tests.contract import run_contract_scenarios

    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            mp.setenv(k, v)
        with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
            run = run_contract_scenarios()
    return run


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker under --dist loadgroup (pytest-xdist's)")
    controller = not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))  # xdist's, runs none
    _terminal_size_as_the_session_has_it(config)
    if not controller:  # moto's patches where tests run (importing moto's ASL parser alone takes ~0.5 s)
        _s3_objects_in_memory()
        _parse_each_definition_once()
        _serialize_moto_transactions()
    if not hasattr(config, "workerinput") and not config.option.collectonly and not config.option.keyword \
            and fioruns.wanted([str(a) for a in config.args], config.option.markexpr, cwd=config.invocation_params.dir):
        # The long real-fio runs (tests/fioruns.py), from the start of the session: by the time a
        # worker reaches the tests that read them they are done. Started once, here (the process
        # that runs or distributes the tests); the workers inherit where they are.
        child, directory = fioruns.start()
        config.stash[_FIO_RUNS] = (child, directory)
        os.environ[fioruns.ENV] = str(directory)


#: The session's COLUMNS and LINES ("" when unset), handed to xdist's workers through the environment.
_TERMINAL_ENV = "REPLMON_TEST_TERMINAL"


def _terminal_size_as_the_session_has_it(config: pytest.Config) -> None:
    """An xdist worker starts with COLUMNS=80 and LINES=24 that the session did not set, and the
    CLI commands the lab tests run (rich reads COLUMNS) then wrap their tables and lines at 80:
    a worker takes the session's own values back, or none: what the same tests see without xdist."""
    if not hasattr(config, "workerinput"):
        os.environ[_TERMINAL_ENV] = json.dumps({k: os.environ.get(k, "") for k in ("COLUMNS", "LINES")})
        return
    for k, v in json.loads(os.environ.get(_TERMINAL_ENV, "{}")).items():
        if v:
            os.environ[k] = v
        else:
            os.environ.pop(k, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    started = config.stash.get(_FIO_RUNS, None)
    if started is not None:
        os.environ.pop(fioruns.ENV, None)
        fioruns.stop(*started)


_FIO_RUNS = pytest.StashKey[tuple[Any, Path]]()


#: The lab modules that run first, beside the knee (~360 s of them: longer than its ~250 s); the
#: others, which time faults, keep their order after them.
LAB_BESIDE_THE_KNEE = ("test_wheel", "test_enroll_lab", "test_lab", "test_mounts_lab")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests sharing one of our session- or module-scoped fixtures (the contract run, a module's
    moto run) go to one xdist worker under ``--dist loadgroup`` (make test-fast): run once, not once
    per worker. Without xdist the marker does nothing. ``tryfirst``: xdist's worker reads the
    markers in its own hook of the same name (to suffix node ids with ``@group``); a conftest hook
    runs after it unless told otherwise, and the groups were silently ignored.

    The lab's tests are one group, run one after the other as they were written to (real servers,
    real time), and the knee's long run (mostly waiting on its throttle) is a group of its own: on
    two workers it runs beside them, not after them (make test). Beside it (its first ~4 min) go
    the lab modules that only check what happened (LAB_BESIDE_THE_KNEE); the ones that time a fault
    (a store outage that must meet records in flight, a stall detected within its bound) come
    after, as they ran alone: under the knee's load the outage once met no record."""
    lab_first = {name: n for n, name in enumerate(LAB_BESIDE_THE_KNEE)}
    items[:] = sorted(items, key=lambda i: lab_first.get(i.module.__name__.rpartition(".")[2], len(lab_first))  # type: ignore[attr-defined]
                      if i.get_closest_marker("lab") else -1)
    for item in items:
        if item.get_closest_marker("lab"):
            item.add_marker(pytest.mark.xdist_group("knee" if item.get_closest_marker("knee") else "lab"))
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        for name in item.fixturenames:  # type: ignore[attr-defined]
            defs = info.name2fixturedefs.get(name)
            if not defs or not getattr(defs[-1].func, "__module__", "").startswith("tests"):
                continue
            if defs[-1].scope == "session":
                item.add_marker(pytest.mark.xdist_group(name))
                break
            if defs[-1].scope == "module":
                item.add_marker(pytest.mark.xdist_group(item.module.__name__))  # type: ignore[attr-defined]
                break


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup`` each xdist worker suffixes a grouped test's node id with
    ``@<group>``: the scheduler groups by that suffix. If the suffix is missing (pytest 9.2 stopped
    reading the attribute xdist 3.8.0 sets), every shared run silently ran once per worker: stop.

    Then what collection imported (botocore's models, moto's backends, the ASL parser), alive for
    the whole run, is frozen out of the garbage collector's reach, and young collections are made
    rarer: a worker's heap grows past a million objects, and each full collection walked them all
    (the preflight tests took ~4x their time alone). Only the collector's schedule changes."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    if not getattr(session.config.option, "loadgroup", False) or not hasattr(session.config, "workerinput"):
        return
    lost = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {len(lost)} tests (e.g. {lost[0]}): "
                                "pin a pytest that pytest-xdist supports (requirements-dev.txt)")


# The route registry on moto's DynamoDB (tests/test_registry.py, tests/test_inventory.py; a module
# may define its own ``ddb``, as tests/test_store.py does).
@pytest.fixture(scope="module")
def ddb() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():  # one mock per module (starting moto costs ~1 s); a fresh table per test
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture
def registry(ddb: Any, request: pytest.FixtureRequest) -> Any:
    from replmon.adapters.registry_table import DynamoRegistry

    table = f"{TABLE}-{request.node.name[:200]}"
    ensure_table(ddb, table, TEMPLATE)
    return DynamoRegistry(table, ddb)
