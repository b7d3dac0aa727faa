"""Render the member roles' trust policies (src/replmon/fleet/trust.py ASSUMED_BY) into
templates/member-account.yaml, between the ``# >>> generated: <kind> trust`` and ``# <<< generated``
markers. Edit ASSUMED_BY, never the generated blocks.

    python tools/render_member_trust.py          # check: exit 1 if the template is stale
    python tools/render_member_trust.py --write  # rewrite the blocks

tests/test_cross_account.py fails when the template differs from a fresh render.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from replmon.fleet.trust import render_into  # noqa: E402

TEMPLATE = ROOT / "templates" / "member-account.yaml"


def main(argv: list[str]) -> int:
    current = TEMPLATE.read_text()
    fresh = render_into(current)
    if fresh == current:
        return 0
    if "--write" in argv:
        TEMPLATE.write_text(fresh)
        print(f"wrote {TEMPLATE.relative_to(ROOT)}")
        return 0
    print("templates/member-account.yaml's trust policies are stale: python tools/render_member_trust.py --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
