"""Write docs/DEPLOY.md's table of every role's permissions from template.yaml as `sam deploy` hands it to
CloudFormation (SAM-transformed offline: the policies SAM adds for schedules, event invoke configs,
tracing and logs included), between ``<!-- permissions:start -->`` and ``<!-- permissions:end -->``.

    python tools/render_permissions.py           # exit 1 when the page is stale
    python tools/render_permissions.py --write   # rewrite the block

tests/test_docs_deploy.py fails when the block is not what this renders, so the table cannot drift.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "DEPLOY.md"
BLOCK = re.compile(r"(<!-- permissions:start -->\n)(.*?)(<!-- permissions:end -->)", re.S)
#: The heartbeat's per-group schedule roles differ only in the group's number: one row stands for all.
GROUP_ROLE = re.compile(r"^HeartbeatFunctionGroup0[1-9]Role$")


def transformed() -> dict[str, Any]:
    """template.yaml through the SAM translator, offline (it builds ARNs for a placeholder account, calls nothing)."""
    from samtranslator.translator.transform import transform

    from replmon.local.template import TEMPLATE, load_template

    class OfflinePolicies:  # the translator asks IAM for managed policy ARNs only for a name it must look up
        def load(self) -> dict[str, str]:
            return {}

    t = copy.deepcopy(load_template(TEMPLATE))
    for res in t["Resources"].values():
        for uri in ("CodeUri", "DefinitionUri", "ContentUri"):
            if uri in res.get("Properties", {}):
                res["Properties"][uri] = f"s3://artifacts/{res['Properties'][uri].strip('/')}"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(t, {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}, OfflinePolicies())  # type: ignore[arg-type]


def value(v: Any) -> str:
    """An intrinsic as a reader can follow it: a resource's logical id, a parameter's name, a Sub's string."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return ", ".join(value(x) for x in v)
    if isinstance(v, dict) and len(v) == 1:
        (fn, arg), = v.items()
        if fn == "Ref":
            return str(arg)
        if fn == "Fn::GetAtt":
            return (arg if isinstance(arg, str) else ".".join(arg)).removesuffix(".Arn")
        if fn == "Fn::Sub":
            text, names = (arg, {}) if isinstance(arg, str) else arg
            for k, v2 in names.items():
                text = text.replace("${" + k + "}", value(v2))
            return text.replace("arn:${AWS::Partition}:", "arn:aws:")
        if fn == "Fn::If":
            return f"({value(arg[1])} if {arg[0]}, else {value(arg[2])})"
    return json.dumps(v, separators=(",", ":"))


def statements(doc: Any, cond: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(the condition it is under, the statement) for every statement of a policy document, both branches of an If."""
    out: list[tuple[str, dict[str, Any]]] = []
    items = doc.get("Statement", []) if isinstance(doc, dict) and "Statement" in doc else doc
    for st in items if isinstance(items, list) else [items]:
        if isinstance(st, dict) and "Fn::If" in st:
            name, yes, no = st["Fn::If"]
            out += statements([yes], f"if {name}") + statements([no], f"unless {name}")
        elif (isinstance(st, dict) and st.get("Ref") == "AWS::NoValue") or (isinstance(st, dict) and "Fn::If" in st.get("PolicyDocument", {})):
            continue
        elif isinstance(st, dict):
            out.append((cond, st))
    return out


def line(cond: str, st: dict[str, Any]) -> str:
    actions = st.get("Action", st.get("NotAction"))
    actions = [actions] if isinstance(actions, str) else actions
    text = f"{'Deny ' if st.get('Effect') == 'Deny' else ''}`{'`, `'.join(actions)}` on {value(st.get('Resource', '*'))}"
    keys = sorted({k for test in st.get("Condition", {}).values() for k in test})
    if keys:
        text += f" (condition: {', '.join(keys)})"
    return f"{text} ({cond})" if cond else text


def policies(role: dict[str, Any]) -> list[str]:
    props = role["Properties"]
    lines = []
    for pol in props.get("Policies", []):
        doc = pol["Fn::If"][1]["PolicyDocument"] if "Fn::If" in pol else pol["PolicyDocument"]
        under = f"if {pol['Fn::If'][0]}" if "Fn::If" in pol else ""
        lines += [line(c or under, st) for c, st in statements(doc)]
    lines += [f"AWS managed `{arn.rsplit('/', 1)[1]}`" for arn in map(value, props.get("ManagedPolicyArns", []))]
    return [ln.replace("|", "\\|") for ln in lines]


def trusted(role: dict[str, Any]) -> str:
    principals = [st.get("Principal", {}).get("Service") for st in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]]
    return ", ".join(value(p) for p in principals if p)


def roles(t: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in t["Resources"].items() if v["Type"] == "AWS::IAM::Role" and not GROUP_ROLE.match(k)}


def extra_policies(t: dict[str, Any]) -> dict[str, list[str]]:
    """AWS::IAM::Policy resources attached to a role (the demo's replication policy and fault drill)."""
    out: dict[str, list[str]] = {}
    for res in t["Resources"].values():
        if res["Type"] == "AWS::IAM::Policy":
            for r in res["Properties"].get("Roles", []):
                cond = f"if {res['Condition']}" if "Condition" in res else ""
                out.setdefault(value(r), []).extend(line(c or cond, st) for c, st in statements(res["Properties"]["PolicyDocument"]))
    return out


def render(t: dict[str, Any] | None = None) -> str:
    t = t or transformed()
    extra = extra_policies(t)
    rows = ["| role | assumed by | may |", "| --- | --- | --- |"]
    for name, role in roles(t).items():
        label = name + (" (and Group01-07: one per RouteGroup)" if name == "HeartbeatFunctionGroup00Role" else "")
        may = policies(role) + [ln.replace("|", "\\|") for ln in extra.get(name, [])]
        rows.append(f"| `{label}` | {trusted(role)} | {'<br>'.join(may)} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    text = PAGE.read_text()
    m = BLOCK.search(text)
    if not m:
        print("docs/DEPLOY.md has no <!-- permissions:start --> block", file=sys.stderr)
        return 1
    new = text[:m.start(2)] + render() + text[m.end(2):]
    if "--write" in argv:
        PAGE.write_text(new)
        print("wrote docs/DEPLOY.md's permissions table")
        return 0
    print("docs/DEPLOY.md's permissions table is current" if new == text else
          "docs/DEPLOY.md's permissions table is stale: python tools/render_permissions.py --write")
    return 0 if new == text else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
