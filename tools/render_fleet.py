"""Render the fleet's Metrics Insights alarms (src/replmon/fleet/alarms.py) and its dashboard
(src/replmon/fleet/dashboard.py) into template.yaml, between the ``# >>> generated: fleet ...`` and
``# <<< generated`` markers (the alarms and their HasGroupNN conditions, the dashboard). Edit those
files, never the generated blocks.

    python tools/render_fleet.py          # check: exit 1 if template.yaml is stale
    python tools/render_fleet.py --write  # rewrite the blocks

tests/test_fleet_alarms.py fails when template.yaml differs from a fresh render.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from replmon.fleet.alarms import render_into  # noqa: E402
from replmon.fleet.dashboard import render_dashboard_into  # noqa: E402

TEMPLATE = ROOT / "template.yaml"


def main(argv: list[str]) -> int:
    current = TEMPLATE.read_text()
    fresh = render_dashboard_into(render_into(current))
    if fresh == current:
        return 0
    if "--write" in argv:
        TEMPLATE.write_text(fresh)
        print(f"wrote {TEMPLATE.relative_to(ROOT)}")
        return 0
    print("template.yaml's fleet alarms or dashboard are stale: python tools/render_fleet.py --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
