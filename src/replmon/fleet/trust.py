"""Which hub functions assume which role in another account: the one table both sides are written from.

A member account's roles (templates/member-account.yaml) trust exactly the hub functions that
assume them, and each hub function's role (template.yaml) may ``sts:AssumeRole`` exactly the
member roles it assumes. Both follow :data:`ASSUMED_BY`:

- the member roles' trust policies are rendered from it into templates/member-account.yaml
  (``python tools/render_member_trust.py --write``; tests/test_cross_account.py fails when the
  template and a fresh render differ);
- the hub's ``sts:AssumeRole`` statements are checked against it by the IAM evaluator
  (tests/test_cross_account.py), as are :data:`DESTINATION_ROLE_ASSUMED_BY` and the trust policy
  docs/DEPLOY.md gives for the stack's own ``DestinationRoleArn``.

A trust policy cannot name a role whose name has a generated suffix as its principal, so it
admits the hub account and narrows it with ``aws:PrincipalArn`` to each function's role,
``<HubStackName>-<Function>FunctionRole-*`` (CloudFormation's generated name keeps the whole stack
name and logical id: the member template caps HubStackName so that it does), and, when the
deployment sets MemberExternalId, requires ``sts:ExternalId`` ("How to use an external ID when
granting access to your AWS resources to a third party", IAM User Guide).

>>> ASSUMED_BY["reader"]
('CollectSignals',)
>>> assumes("Housekeeping")
('prober',)
>>> function_role_pattern("CollectSignals")
'arn:${AWS::Partition}:iam::${HubAccountId}:role/${HubStackName}-CollectSignalsFunctionRole-*'
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from replmon.core.registry import MEMBER_ROLES

__all__ = ["ASSUMED_BY", "DESTINATION_ROLE_ASSUMED_BY", "OPERATOR_ASSUMES", "assumes", "function_role_pattern", "render_into", "render_trust"]

#: member role kind -> the hub functions that assume ``<MemberRolePrefix>-<kind>`` in a member account.
ASSUMED_BY: Mapping[str, tuple[str, ...]] = {
    # every bucket's replication, tags and encryption (fleet/inventory.py, adapters/member_buckets.py)
    "inventory": ("Inventory",),
    # a registry route's probe objects: written (UploadProbe), HEADed (PollReplication), deleted
    # (Cleanup), swept (Housekeeping), and the 1 KiB heartbeats (Heartbeat); RouteSpec.to_route
    # gives every endpoint its account's prober role
    "prober": ("UploadProbe", "PollReplication", "Cleanup", "Housekeeping", "Heartbeat"),
    # S3's replication metrics in the source account's CloudWatch (signals/rtc.py reader_key)
    "reader": ("CollectSignals",),
}
#: The hub functions that assume the stack's own ``DestinationRoleArn`` (a cross-account
#: destination of the stack's route): every function that reads or deletes its replicas.
DESTINATION_ROLE_ASSUMED_BY: tuple[str, ...] = ("PollReplication", "Cleanup", "Housekeeping", "Heartbeat")

assert set(ASSUMED_BY) == set(MEMBER_ROLES), "every member role has the functions that assume it"


def assumes(function: str) -> tuple[str, ...]:
    """The member role kinds ``function`` assumes (none for most functions)."""
    return tuple(kind for kind, fns in ASSUMED_BY.items() if function in fns)


def function_role_pattern(function: str) -> str:
    """The ARN pattern of a hub function's role, as a ``!Sub`` string of the member template."""
    return f"arn:${{AWS::Partition}}:iam::${{HubAccountId}}:role/${{HubStackName}}-{function}FunctionRole-*"


#: Member roles the hub's operator role (the member template's ``OperatorRoleArn``, optional) may assume
#: too: ``replmon fleet enroll`` / ``unenroll`` and ``replmon uninstall --fleet`` reach the member
#: buckets through the prober, as the functions do (its ExternalId condition included).
OPERATOR_ASSUMES: tuple[str, ...] = ("prober",)


def render_trust(kind: str, indent: int = 6) -> str:
    """The ``AssumeRolePolicyDocument`` of ``<prefix>-<kind>``, as YAML lines at ``indent``."""
    patterns = "".join(f"\n{' ' * (indent + 14)}- !Sub \"{function_role_pattern(f)}\"" for f in ASSUMED_BY[kind])
    if kind in OPERATOR_ASSUMES:
        patterns += f"\n{' ' * (indent + 14)}- !If [HasOperator, !Ref OperatorRoleArn, !Ref AWS::NoValue]"
    principal_arn = f'ArnLike:\n{" " * (indent + 12)}"aws:PrincipalArn":{patterns}'
    pad = " " * indent
    return (f"{pad}AssumeRolePolicyDocument:\n"
            f"{pad}  Version: \"2012-10-17\"\n"
            f"{pad}  Statement:\n"
            f"{pad}    - Effect: Allow\n"
            f"{pad}      Principal: {{AWS: !Sub \"arn:${{AWS::Partition}}:iam::${{HubAccountId}}:root\"}}\n"
            f"{pad}      Action: sts:AssumeRole\n"
            f"{pad}      Condition: !If\n"
            f"{pad}        - HasExternalId\n"
            f"{pad}        - {principal_arn}\n"
            f"{pad}          StringEquals: {{\"sts:ExternalId\": !Ref ExternalId}}\n"
            f"{pad}        - {principal_arn}\n")


def _block(kind: str) -> re.Pattern[str]:
    return re.compile(rf"(?P<head>^(?P<pad> *)# >>> generated: {kind} trust[^\n]*\n).*?(?P<tail>^(?P=pad)# <<< generated\n)",
                      re.M | re.S)


def render_into(template: str) -> str:
    """templates/member-account.yaml with each role's generated trust block rendered afresh."""
    for kind in ASSUMED_BY:
        block = _block(kind)
        found = block.search(template)
        if found is None:
            raise ValueError(f"templates/member-account.yaml has no '# >>> generated: {kind} trust' block")
        fresh = found["head"] + render_trust(kind, len(found["pad"])) + found["tail"]
        template = template[:found.start()] + fresh + template[found.end():]
    return template
