"""Reading template.yaml (CloudFormation short-form tags such as !Ref become plain dicts).

template.yaml ships inside the package (``replmon/local/template.yaml`` links to the checkout's
file), so the lab and the local runner work from an installed wheel too.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml


class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser when PyYAML was built with it (~10x faster on template.yaml), else PyYAML's own."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        return {name: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {name: loader.construct_sequence(node, deep=True)}
    return {name: loader.construct_mapping(node, deep=True)}  # type: ignore[arg-type]


_CfnLoader.add_multi_constructor("!", _tag)

_HERE = resources.files("replmon.local")
TEMPLATE = Path(str(_HERE.joinpath("template.yaml")))
DEFINITION = Path(str(_HERE.joinpath("statemachines", "replication_probe.asl.json")))


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    template: dict[str, Any] = yaml.load(path.read_text(), Loader=_CfnLoader)
    return template
