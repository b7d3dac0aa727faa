"""README.md is a README: at most 200 lines, its sections in the order a new user needs them, and every
local link it gives leads to a file of the repository."""

from __future__ import annotations

import re

from tests.conftest import ROOT

README = ROOT / "README.md"
ORDER = ["What it answers", "Two commands", "Deploy", "What pages you", "What it costs", "Limits", "Uninstall"]


def test_the_readme_is_at_most_200_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to docs/"


def test_the_readme_sections_come_in_order() -> None:
    assert re.findall(r"^## (.+)$", README.read_text(), re.M) == ORDER


def test_the_two_commands_are_the_ones_ci_runs() -> None:
    """`.ci/run` runs the README's test command; the main job is `make demo`."""
    text = README.read_text()
    block = text.split("## Two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make demo", "make test"]
    assert [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "set ", "cd "))] == ["make test"]


def test_every_local_link_of_the_readme_and_the_new_docs_exists() -> None:
    for page in (README, ROOT / "docs" / "DEPLOY.md", ROOT / "docs" / "LAB.md", ROOT / "docs" / "FLEET.md", ROOT / "docs" / "CLI.md"):
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name}: {target}"
