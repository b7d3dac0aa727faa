"""Resolve a CloudFormation template's intrinsics for given parameter values, the way a deploy would.

Used where replmon needs the *deployed* values of its template offline: the lab builds each
function's MinIO policy from that function's role statements, and the contract tests evaluate
recorded AWS calls against the roles and compare alarms with emitted metrics.

>>> t = {"Parameters": {"P": {"Default": "x"}}, "Conditions": {"C": {"Fn::Equals": [{"Ref": "P"}, "x"]}},
...      "Resources": {"B": {"Type": "AWS::S3::Bucket"}}}
>>> r = Resolver(t, physical={"B": "my-bucket"})
>>> r.resolve({"Fn::If": ["C", {"Fn::Sub": "arn:aws:s3:::${B}/${P}*"}, "no"]})
'arn:aws:s3:::my-bucket/x*'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NO_VALUE = object()


class Resolver:
    def __init__(self, template: dict[str, Any], parameters: Mapping[str, Any] | None = None,
                 physical: Mapping[str, str] | None = None, attributes: Mapping[str, Any] | None = None,
                 region: str = "us-east-1", account: str = "123456789012", stack: str = "replmon") -> None:
        self.t = template
        self.params = {k: v.get("Default", "") for k, v in template.get("Parameters", {}).items()}
        self.params.update(parameters or {})
        self.physical = dict(physical or {})
        self.attributes = dict(attributes or {})  # "Logical.Attr" -> value
        self.pseudo = {"AWS::Region": region, "AWS::AccountId": account, "AWS::StackName": stack, "AWS::Partition": "aws",
                       "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": NO_VALUE}

    # ------------------------------------------------------------------ conditions
    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.t["Conditions"][name]))

    def exists(self, logical_id: str) -> bool:
        res = self.t.get("Resources", {}).get(logical_id)
        return res is not None and ("Condition" not in res or self.condition(res["Condition"]))

    # ------------------------------------------------------------------ values
    def ref(self, name: str) -> Any:
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.params:
            value = self.params[name]
            return str(value) if not isinstance(value, list) else value
        if name in self.physical:
            return self.physical[name]
        if name in self.t.get("Resources", {}):
            return f"{self.pseudo['AWS::StackName']}-{name}"  # what CloudFormation would name it
        raise KeyError(f"Ref to unknown name {name!r}")

    def get_att(self, logical: str, attr: str) -> Any:
        key = f"{logical}.{attr}"
        if key in self.attributes:
            return self.attributes[key]
        kind = self.t["Resources"][logical]["Type"]
        name = self.ref(logical)
        region, account = self.pseudo["AWS::Region"], self.pseudo["AWS::AccountId"]
        defaults = {
            ("AWS::DynamoDB::Table", "Arn"): f"arn:aws:dynamodb:{region}:{account}:table/{name}",
            ("AWS::SQS::Queue", "Arn"): f"arn:aws:sqs:{region}:{account}:{name}",
            ("AWS::SQS::Queue", "QueueName"): name,
            ("AWS::S3::Bucket", "Arn"): f"arn:aws:s3:::{name}",
            ("AWS::IAM::Role", "Arn"): f"arn:aws:iam::{account}:role/{name}",
            ("AWS::KMS::Key", "Arn"): f"arn:aws:kms:{region}:{account}:key/{name}",
            ("AWS::Lambda::Function", "Arn"): f"arn:aws:lambda:{region}:{account}:function:{name}",
            ("AWS::Serverless::Function", "Arn"): f"arn:aws:lambda:{region}:{account}:function:{name}",
        }
        if (kind, attr) not in defaults:
            raise KeyError(f"no value for Fn::GetAtt {key} ({kind}); pass it in attributes")
        return defaults[(kind, attr)]

    def sub(self, text: str, extra: Mapping[str, Any]) -> str:
        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in extra:
                return str(extra[name])
            if "." in name and name.split(".")[0] in self.t.get("Resources", {}):
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def resolve(self, node: Any) -> Any:
        """The value of ``node`` with every intrinsic replaced; AWS::NoValue entries removed."""
        if isinstance(node, list):
            items = [self.resolve(n) for n in node]
            return [v for v in items if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical, attr = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.get_att(logical, attr)
            if key == "Fn::Sub":
                if isinstance(arg, str):
                    return self.sub(arg, {})
                text, names = arg
                return self.sub(text, {k: self.resolve(v) for k, v in names.items()})
            if key == "Fn::If":
                cond, yes, no = arg
                return self.resolve(yes if self.condition(cond) else no)
            if key == "Fn::Equals":
                a, b = (self.resolve(x) for x in arg)
                return str(a) == str(b)
            if key == "Fn::Not":
                return not self.resolve(arg[0])
            if key == "Fn::And":
                return all(self.resolve(x) for x in arg)
            if key == "Fn::Or":
                return any(self.resolve(x) for x in arg)
            if key in ("Condition", "Fn::Condition"):  # the YAML loader spells !Condition Fn::Condition
                return self.condition(arg)
            if key == "Fn::FindInMap":
                m, k1, k2 = (self.resolve(x) for x in arg)
                return self.t["Mappings"][m][k1][k2]
            if key == "Fn::Join":
                sep, items = arg
                return sep.join(str(x) for x in self.resolve(items))
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if key == "Fn::Select":
                i, items = arg
                return self.resolve(items)[int(self.resolve(i))]
        out = {k: self.resolve(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}


def function_statements(template: dict[str, Any], function: str, resolver: Resolver) -> list[dict[str, Any]]:
    """The inline policy statements template.yaml gives ``<function>Function`` (SAM's
    ``Policies: [{Statement: [...]}]`` form), resolved."""
    props = template["Resources"][f"{function}Function"]["Properties"]
    out: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        if isinstance(policy, dict) and "Statement" in policy:
            out += resolver.resolve(policy["Statement"])
    return out
