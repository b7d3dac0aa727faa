"""Rewrite README.md's cost block from what `replmon cost` computes now (tests/test_docs.py checks
every dollar figure in the block is in its output): `python tools/render_cost_block.py --write`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CRR = ["--sizes", "crr-ladder", "--rate-minutes", "1440", "--cross-region"]
FLEET = ["--routes", "1,100,1000"]
ROWS = [
    ("`crr-ladder` (10 MiB .. 80 GiB x 10 trials) once a day, RTC, cross-region from us-east-1", CRR, 2),
    ("the same from ap-northeast-1 (the study's Tokyo -> Singapore: transfer is billed at the source Region's rate)",
     [*CRR, "--source-region", "ap-northeast-1"], 2),
]


def cost(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "replmon.cli", "cost", "--format", "json", *args], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out)


def row(label: str, doc: dict, lines: int) -> str:
    top = sorted(doc["lines"], key=lambda line: -line["usd_per_month"])[:lines]
    parts = [f"{line['item']} {line['usd_per_month']} ({round(line['share_percent'])} %)" for line in top]
    return f"| {label} | {doc['total_usd_per_month']} | {', '.join(parts)} |"


def fleet() -> str:
    """The one per-route figure: the fleet's marginal route at the defaults (`replmon cost --routes`)."""
    doc = cost(FLEET)
    rows = doc["fleet"]
    per_route = rows[-1]["marginal_usd_per_route_month"]
    total = sum(x["usd_per_month"] for x in doc["per_route_lines"])
    top = sorted(doc["per_route_lines"], key=lambda x: -x["usd_per_month"])[:5]
    shares = ", ".join(f"{x['item'].split(' (')[0]} {round(100 * x['usd_per_month'] / total)} %" for x in top)
    table = "\n".join(f"| {r['routes']:,} | {r['usd_per_month']} | {r['usd_per_route_month']} |" for r in rows)
    return (f"**${per_route} per route a month** (modelled: one more route of the fleet at the defaults, probe classes "
            f"{doc['probe_classes']}, a heartbeat a minute, the RTC fee included; `replmon cost --routes 1,100,1000`). "
            "Each line the deployed stack can count is checked against it within 5 % "
            "(tests/deployed/test_deployed_cost.py). Largest shares of a route: " + shares + ".\n\n"
            "| routes | $ per month | $ per route (the stack's fixed part shared) |\n| ---: | ---: | ---: |\n" + table)


def block() -> str:
    body = "\n".join(row(label, cost(args), n) for label, args, n in ROWS)
    return ("<!-- cost:start -->\n" + fleet() + "\n\nStudies on their own schedule (one route, `replmon cost --sizes ...`):\n\n"
            "| schedule | $ per month | largest lines |\n| --- | ---: | --- |\n" + body +
            "\n\n(`replmon cost --sizes crr-ladder --rate-minutes 1440 --cross-region` and the same\n"
            "with `--source-region ap-northeast-1`; every line, quantity and assumption with `--format json`.)\n<!-- cost:end -->")


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
