"""The layer ships only what Lambda runs, and every handler imports from it alone.

The layer is built by its own Makefile (the one `sam build` runs), for this machine's Python
instead of Lambda's arm64 (PIP_TARGET=), then each functions/*.py handler is imported with a
clean sys.path: no site-packages (-S), no user or environment paths (-I), only the layer and the
function's code, with the environment a traced Lambda function has.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.build
FUNCTIONS = sorted(p.stem for p in (ROOT / "functions").glob("*.py"))
LAMBDA_ENV = {"LAMBDA_TASK_ROOT": "/var/task", "AWS_LAMBDA_FUNCTION_NAME": "replmon-test", "AWS_REGION": "us-east-1",
              "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_SERVICE_NAME": "replmon", "POWERTOOLS_METRICS_NAMESPACE": "Replmon",
              "PATH": os.environ["PATH"]}


@pytest.fixture(scope="module")
def layer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("layer")
    r = subprocess.run(["make", "-s", "-C", str(ROOT / "layers" / "replmon"), "build-ReplmonLayer", f"ARTIFACTS_DIR={out}",
                        "PIP_TARGET=", f"PYTHON={sys.executable}", f"REPLMON_SRC={ROOT / 'src'}"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    yield out / "python"


def test_the_layer_holds_the_domain_adapters_and_entry_points_only(layer: Path) -> None:
    pkg = layer / "replmon"
    assert (pkg / "probe" / "steps.py").exists() and (pkg / "adapters" / "s3.py").exists() and (pkg / "entry" / "poll_replication.py").exists()
    assert (pkg / "core" / "defaults.json").exists() and (pkg / "probe" / "ladders.json").exists()
    # PlanProbes' fleet caps price each route with the cost model (fleet/caps.py): cost ships, with its prices
    assert (pkg / "cost" / "fleet.py").exists() and (pkg / "cost" / "pricing.json").exists()
    for local_only in ("cli", "local", "lab"):
        assert not (pkg / local_only).exists(), f"replmon/{local_only} is not something Lambda runs"


def test_the_layer_ships_exactly_what_the_handlers_import(layer: Path) -> None:
    """Every module replmon.entry reaches through its imports (tests/test_layering.py reads them
    independently of the layer's ship.py), and no other."""
    from tests.test_layering import graph

    edges = graph()
    needed: set[str] = set()
    todo = [m for m in edges if m == "replmon.entry" or m.startswith("replmon.entry.")]
    while todo:
        m = todo.pop()
        if m not in needed:
            needed.add(m)
            todo += [*edges[m], *(".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1))]
    shipped = {".".join(p.relative_to(layer).with_suffix("").parts).removesuffix(".__init__") for p in (layer / "replmon").rglob("*.py")}
    assert shipped == needed


@pytest.mark.parametrize("trace", ["false", "true"])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_handler_imports_from_the_layer_alone(layer: Path, function: str, trace: str) -> None:
    code = (f"import sys; sys.path[:0] = [{str(layer)!r}, {str(ROOT / 'functions')!r}]\n"
            f"import {function}\n"
            f"assert callable({function}.handler)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'matplotlib', 'moto', 'yaml')"
            " or m.startswith(('replmon.cli', 'replmon.local', 'replmon.lab')))\n"
            "assert not bad, bad\n")
    if trace == "true" and function != "plan_probes":  # the X-Ray SDK is in the layer and patches botocore
        code += "assert 'aws_xray_sdk.ext.botocore.patch' in sys.modules\n"
    elif trace == "false":
        code += "assert 'aws_xray_sdk' not in sys.modules, 'the X-Ray SDK loads only with REPLMON_TRACE_AWS_CALLS=true'\n"
    env = {**LAMBDA_ENV, "REPLMON_TRACE_AWS_CALLS": trace}
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd="/")
    assert r.returncode == 0, r.stderr[-3000:]
