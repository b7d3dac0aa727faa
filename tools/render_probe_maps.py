"""The state machine's second probes' Map, written from the first so it cannot drift.

``Probes`` (ItemsPath: the plan inline in the state) and ``ProbesFromPlan`` (ItemReader: a fleet
plan too large for the state, read from the plan bucket; fleet/planner.py) run the same probe
workflow. Step Functions wants every state name unique in the whole definition, so the copy's
states carry the suffix ``FromPlan``; everything else is the same (its Label and Comment aside).

    python tools/render_probe_maps.py          # check: exit 1 if ProbesFromPlan is stale
    python tools/render_probe_maps.py --write  # rewrite it from Probes

tests/test_fleet_plan.py checks it is current.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFINITION = ROOT / "statemachines" / "replication_probe.asl.json"
SUFFIX = "FromPlan"
COMMENT = ("The same probe workflow as Probes (tools/render_probe_maps.py writes it from Probes; its states carry "
           "the suffix FromPlan: state names are unique in a definition) for a plan too large for the state "
           "(fleet/planner.py INLINE_PLAN_BYTES): the items are read from the plan bucket, one JSON array "
           "(ItemReader, InputType JSON), and never pass through the state.")
ITEM_READER = {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON"},
               "Parameters": {"Bucket.$": "$.plan.bucket", "Key.$": "$.plan.key"}}


def _renamed(processor: dict[str, Any]) -> dict[str, Any]:
    names = set(processor["States"])
    out = copy.deepcopy(processor)
    out["StartAt"] = processor["StartAt"] + SUFFIX

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (v + SUFFIX if k in ("Next", "Default") and v in names else walk(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    out["States"] = {name + SUFFIX: walk(state) for name, state in processor["States"].items()}
    return out


def from_plan(probes: dict[str, Any]) -> dict[str, Any]:
    """``ProbesFromPlan`` for the ``Probes`` Map state."""
    out: dict[str, Any] = {}
    for key, value in probes.items():
        if key == "ItemsPath":
            continue
        if key == "Comment":
            out[key] = COMMENT
            out["ItemReader"] = copy.deepcopy(ITEM_READER)
        elif key == "Label":
            out[key] = value + SUFFIX
        elif key == "ItemProcessor":
            out[key] = _renamed(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(definition: dict[str, Any]) -> dict[str, Any]:
    states = {k: v for k, v in definition["States"].items() if k != "ProbesFromPlan"}
    out: dict[str, Any] = {}
    for name, state in states.items():
        out[name] = state
        if name == "Probes":
            out["ProbesFromPlan"] = from_plan(state)
    return {**definition, "States": out}


def main(argv: list[str]) -> int:
    text = DEFINITION.read_text()
    want = json.dumps(render(json.loads(text)), indent=2, ensure_ascii=False) + "\n"
    if "--write" in argv:
        DEFINITION.write_text(want)
        return 0
    if want != text:
        print(f"{DEFINITION.relative_to(ROOT)}: ProbesFromPlan is stale; run python tools/render_probe_maps.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
