"""The local ASL runner's contract with moto (pinned): fail loudly if the patch points move."""

from __future__ import annotations

import re
from importlib.metadata import version

from replmon.local.aslrun import DEFINITION, check_patch_points, function_arn, load_definition
from tests.conftest import ROOT


def test_moto_is_the_pinned_version_and_its_patch_points_are_where_we_patch() -> None:
    pinned = re.search(r'"moto\[[^\]]+\]==([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned and version("moto") == pinned.group(1)
    check_patch_points()  # raises RuntimeError naming the moved internal


def test_definition_substitution_names_every_function() -> None:
    text = load_definition(DEFINITION)
    assert "${" not in text
    for name in ("PlanProbes", "UploadProbe", "PollReplication", "RecordResult", "Cleanup"):
        assert function_arn(name) in text
