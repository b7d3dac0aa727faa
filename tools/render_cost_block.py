"""Rewrite README.md's cost block from what `replmon cost --routes` computes now: one route's month and a
40-route fleet's, with the largest lines one route adds (tests/test_docs.py checks the block is what this
renders): `python tools/render_cost_block.py --write`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the per-route figure (one route: the hub's fixed costs included) and the fleet example
FLEET = [1, 40]
ARGS = ["--routes", ",".join(map(str, FLEET))]
TOP_LINES = 3


def cost(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "replmon.cli", "cost", "--format", "json", *args], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)


def block(doc: dict | None = None) -> str:
    doc = doc or cost(ARGS)
    rows = [f"| {f['routes']} | {f['usd_per_month']:.2f} | {f['usd_per_route_month']:.2f} | {f['marginal_usd_per_route_month']:.2f} |"
            for f in doc["fleet"]]
    top = sorted(doc["per_route_lines"], key=lambda line: -line["usd_per_month"])[:TOP_LINES]
    largest = ", ".join(f"{line['item']} ${line['usd_per_month']:.2f}" for line in top)
    return ("<!-- cost:start -->\n"
            f"Modelled (`replmon cost {' '.join(ARGS)}`: {doc['region']} list prices of {doc['prices_as_of']}, probe classes "
            f"{doc['probe_classes']}, heartbeats every {doc['assumptions']['heartbeat_seconds']} s; free tiers not applied):\n\n"
            "| routes | $ per month | $ per route | $ one more route adds |\n| ---: | ---: | ---: | ---: |\n" + "\n".join(rows) +
            f"\n\nThe largest lines one route adds: {largest}.{ranges(doc)}\n<!-- cost:end -->")


def ranges(doc: dict) -> str:
    """The lines priced on an assumed basis (AWS's pricing page does not confirm it): each basis's figure."""
    out = []
    lo, hi = doc["fleet"][-1]["marginal_usd_per_route_month_range"]
    for r in doc.get("price_ranges", []):
        bases = "; ".join(f"{b['basis']} ${b['usd_per_route_month']:.2f}" for b in r["bases"])
        out.append(f" {r['item'].split(' (')[0]} are priced per metric analyzed on an assumed basis, {r['assumed_basis']} "
                   f"(per route a month: {bases}): one more route adds ${lo:.2f} to ${hi:.2f}.")
    return "".join(out)


def main() -> int:
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = re.sub(r"<!-- cost:start -->.*?<!-- cost:end -->", lambda _: block(), text, flags=re.S)
    if "--write" in sys.argv:
        readme.write_text(new)
        print("wrote README.md's cost block")
        return 0
    print("README.md's cost block is current" if new == text else "README.md's cost block is stale: run with --write")
    return 0 if new == text else 1


if __name__ == "__main__":
    raise SystemExit(main())
