"""The verification matrix: which behaviour is checked by which offline test, and what only a live
AWS account can confirm, rendered from docs/verification.json into docs/VERIFICATION.md (the matrix)
and README.md (its summary: how many behaviours, and where the matrix is) between
``<!-- verification:start -->`` and ``<!-- verification:end -->``.

    python tools/verification_matrix.py          # check: exit 1 if a rendered block is stale
    python tools/verification_matrix.py --write  # rewrite the blocks

tests/test_verification_matrix.py checks that every test named exists and the blocks are current.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "verification.json"
README, PAGE = ROOT / "README.md", ROOT / "docs" / "VERIFICATION.md"
BLOCK = re.compile(r"(<!-- verification:start -->\n)(.*?)(<!-- verification:end -->)", re.S)


def rows() -> list[dict[str, Any]]:
    return list(json.loads(DATA.read_text())["rows"])


def summary() -> str:
    return (f"Nothing has run on a real AWS account yet. {len(rows())} behaviours are checked offline, against AWS's documented "
            "contracts (moto, an IAM policy evaluator, the template) or on real servers in the lab; each, with the test that checks it "
            "and what still needs a live account: [docs/VERIFICATION.md](docs/VERIFICATION.md).\n")


def render() -> str:
    lines = [f"Nothing has run on a real AWS account yet. {len(rows())} behaviours are checked offline, against AWS's "
             "documented contracts (moto, an IAM policy evaluator, the template) or on real servers in the lab; the right "
             "column says what still needs a live account.", "",
             "| behaviour | checked offline by | needs a live AWS account for |", "| --- | --- | --- |"]
    for r in rows():
        tests = "<br>".join(f"`{t.removeprefix('tests/')}`" for t in r["offline"])
        lines.append(f"| {r['behaviour']} | {tests} | {r['live'] or 'nothing more (a property of the template or the code)'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    for path, body in ((README, summary()), (PAGE, render())):
        text = path.read_text()
        m = BLOCK.search(text)
        if not m:
            raise SystemExit(f"{path}: no <!-- verification:start --> block")
        if m.group(2) != body:
            stale.append(path)
            if "--write" in argv:
                path.write_text(text[:m.start(2)] + body + text[m.end(2):])
    if stale and "--write" not in argv:
        print("stale: " + ", ".join(str(p) for p in stale) + " (python tools/verification_matrix.py --write)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
