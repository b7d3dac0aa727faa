"""The README's verification matrix is generated and true: every offline test it names exists, and
the rendered blocks (README.md, docs/VERIFICATION.md) are what docs/verification.json renders.
Also: the glossary defines the terms the README uses, LICENSE is Apache-2.0, the CHANGELOG names
this version."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from replmon import __version__
from tests.conftest import ROOT, tool_module


def matrix() -> object:
    return tool_module("verification_matrix")  # type: ignore[no-any-return]


def test_every_test_the_matrix_names_exists() -> None:
    m = matrix()
    names: dict[Path, set[str]] = {}
    missing = []
    for row in m.rows():  # type: ignore[attr-defined]
        assert row["offline"], row["behaviour"]
        for ref in row["offline"]:
            file, _, name = ref.partition("::")
            path = ROOT / file
            if path not in names:
                names[path] = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)} if path.exists() else set()
            if name not in names[path]:
                missing.append(ref)
    assert missing == []


def test_the_rendered_matrix_is_current() -> None:
    assert matrix().main([]) == 0  # type: ignore[attr-defined]
    readme = (ROOT / "README.md").read_text()
    assert "Nothing has run on a real AWS account yet" in readme


def test_the_glossary_defines_the_readmes_terms() -> None:
    glossary = (ROOT / "docs" / "GLOSSARY.md").read_text()
    defined = set(re.findall(r"\*\*([^*]+)\*\*", glossary))
    for term in ("RTC", "EMF", "ASL", "RPO", "SLO", "bound", "interval", "knee", "route", "target", "burn rate", "error budget",
                 "P1-P5", "R1-R18", "M1-M3", "lab", "STUCK", "preset"):
        assert term in defined, f"docs/GLOSSARY.md does not define {term}"


def test_license_and_changelog() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {__version__}" in changelog or "## Unreleased" in changelog
