"""Copy into the layer exactly what the Lambda handlers run: the modules replmon.entry imports,
followed through every import (module level and deferred, read with ast), their packages, the
package data those modules name (defaults.json, ladders.json) and py.typed. The CLI, the local
runner, the lab, the cost model and anything else no handler imports stay out.

    python ship.py SRC DEST     # SRC holds replmon/, DEST is the layer's python/ directory
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path


def module_name(src: Path, path: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(src: Path, path: Path, known: set[str]) -> set[str]:
    me = module_name(src, path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *([base] if base else [])])
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in out if m in known}


def closure(src: Path) -> dict[str, Path]:
    files = {module_name(src, p): p for p in (src / "replmon").rglob("*.py") if "__pycache__" not in p.parts}
    known = set(files)
    todo = [m for m in files if m == "replmon.entry" or m.startswith("replmon.entry.")]
    shipped: dict[str, Path] = {}
    while todo:
        m = todo.pop()
        if m in shipped:
            continue
        shipped[m] = files[m]
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a module runs its packages
        todo += imported(src, files[m], known)
    return shipped


def data_files(shipped: dict[str, Path]) -> set[Path]:
    """Package data a shipped module names (its own directory), and the package's py.typed."""
    out = set()
    for path in shipped.values():
        text = path.read_text()
        out |= {d for d in path.parent.glob("*.json") if d.name in text}
        out |= set(path.parent.glob("py.typed"))
    return out


def main(src: Path, dest: Path) -> int:
    shipped = closure(src)
    for path in [*shipped.values(), *data_files(shipped)]:
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    print(f"layer: {len(shipped)} replmon modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
