"""The package shows its domains, and its imports point one way (docs/ARCHITECTURE.md, "Layers").

Every ``import`` in src/replmon - at module level or inside a function, where imports are
deferred for cold starts - is read with ``ast``; an import from a folder that may not import
the other fails, and so does any circle of modules importing each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.conftest import ROOT

SRC = ROOT / "src"
PACKAGE = SRC / "replmon"

DOMAIN = {"core", "probe", "signals", "fleet", "mounts", "cost"}
#: What each folder (or top-level module) may import, besides itself. Each folder's __init__.py
#: says the same in words.
ALLOWED: Mapping[str, set[str]] = {
    "core": set(),
    "signals": {"core"},
    "mounts": {"core"},
    "probe": {"core", "signals"},
    "fleet": {"core", "probe", "signals", "cost"},  # the planner's caps price routes with `replmon cost`'s model
    "cost": {"core", "probe", "signals", "fleet"},  # it prices what the functions do (the expectation's hour items)
    "adapters": {"core"},
    "wiring": {"core", "probe", "signals", "adapters"},
    "entry": {"core", "probe", "signals", "fleet", "mounts", "wiring"},
    "local": {"core", "probe", "signals", "fleet", "adapters", "wiring", "entry"},
    "lab": {"core", "probe", "signals", "fleet", "mounts", "cost", "adapters", "wiring", "entry", "local"},
    "cli": {"core", "probe", "signals", "fleet", "mounts", "cost", "adapters", "wiring", "entry", "local", "lab"},
    "__init__": set(),
}
#: The mount runner is the fio container's entry point (python -m replmon.mounts.runner): it
#: takes its S3 client and EMF sink from the adapters, as the Lambda entry points do.
EXCEPTIONS = {("replmon.mounts.runner", "adapters")}
#: The AWS SDK stays behind the ports: no domain module imports it.
SDK = ("boto3", "botocore")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, known: Iterable[str]) -> set[str]:
    """Every module (of ``known``, or an outside top-level package) that ``path`` imports."""
    known = set(known)
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *([base] if base else [])])
            for a in node.names:  # `from replmon.probe import ladders` imports the module replmon.probe.ladders
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: {i for i in imports(p, mods) if i in mods and i != m} for m, p in mods.items()}


def forbidden(edges: Mapping[str, Iterable[str]]) -> list[str]:
    bad = []
    for src, targets in edges.items():
        for dst in targets:
            a, b = layer(src), layer(dst)
            if a != b and b not in ALLOWED[a] and (src, b) not in EXCEPTIONS and dst != "replmon":
                bad.append(f"{src} -> {dst} ({a} may import {sorted(ALLOWED[a]) or 'nothing in replmon'})")
    return sorted(bad)


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_folder_imports_only_what_its_layer_allows() -> None:
    assert forbidden(graph()) == []


def test_no_module_imports_itself_back_through_others() -> None:
    assert cycles(graph()) == []


def test_the_domain_never_imports_the_aws_sdk() -> None:
    mods = modules()
    bad = sorted(f"{m} imports {i}" for m, p in mods.items() if layer(m) in DOMAIN and (m, "adapters") not in EXCEPTIONS
                 for i in imports(p, mods) if i.split(".")[0] in SDK)
    assert bad == []


def test_every_folder_says_its_job_and_what_it_may_import() -> None:
    for folder in sorted(p.parent for p in PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        assert doc.startswith(f"{folder.name}: ") and "May import:" in doc, folder
    assert set(ALLOWED) >= {layer(m) for m in modules()}, "a new folder needs its row in ALLOWED (and its __init__ docstring)"


#: Folders whose modules are named after what they serve: entry/ after a Lambda function
#: (entry/housekeeping.py runs probe/housekeeping.py), cli/ after a command (cli/report.py).
MIRRORS = {"entry", "cli"}


def test_one_name_one_thing() -> None:
    """No module file name in two folders (but the mirrors), no public class defined twice: the
    issue's two Plans, two RunResults, two runner.py and presets.py cannot come back."""
    files: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for m, p in modules().items():
        if p.name not in ("__init__.py", "__main__.py") and layer(m) not in MIRRORS:
            files.setdefault(p.name, []).append(m)
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                classes.setdefault(node.name, []).append(m)
    assert {k: v for k, v in files.items() if len(v) > 1} == {}
    assert {k: v for k, v in classes.items() if len(v) > 1} == {}


@pytest.mark.parametrize(("edges", "problem"), [
    ({"replmon.core.record": {"replmon.probe.state"}}, "forbidden"),  # an arrow back up
    ({"replmon.signals.slo": {"replmon.probe.results"}}, "forbidden"),  # signals may not import probe
    ({"replmon.cli.probe": {"replmon.cli.labcmd"}, "replmon.cli.labcmd": {"replmon.cli.probe"}}, "cycle"),  # a circle
])
def test_the_checks_bite(edges: dict[str, set[str]], problem: str) -> None:
    assert bool(forbidden(edges)) is (problem == "forbidden")
    assert bool(cycles(edges)) is (problem == "cycle")
