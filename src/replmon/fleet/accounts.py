"""Which accounts the inventory reads, and how (``REPLMON_INVENTORY``).

The hub's own account is always read (its buckets are reached through its own
``<MemberRolePrefix>-inventory`` role, as every member's: templates/member-account.yaml is
deployed in the hub's account too); then ``MemberAccounts``; then, with
``DiscoverOrganizationAccounts``, every ACTIVE account of the organization. Each account once, in
that order. Every role is assumed with MemberExternalId when it is set (adapters/clients.py
``assume_role_params``, the one AssumeRole request).

>>> s = load_inventory_settings({"member_accounts": "444455556666, 111122223333", "opt_out_tag": "replmon:probe=off"})
>>> s.member_accounts, s.opt_out
(['444455556666', '111122223333'], ('replmon:probe', 'off'))
>>> account_list(s, "111122223333")
['111122223333', '444455556666']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError, config_error
from replmon.core.names import ACCOUNT_RE

#: The environment variable the Inventory function reads (JSON of :class:`InventorySettings`).
ENV = "REPLMON_INVENTORY"


class InventorySettings(BaseModel):
    """The inventory's template parameters (errors name them)."""

    model_config = ConfigDict(extra="forbid")

    member_accounts: list[str] = Field(default_factory=list, description="MemberAccounts")
    discover_organization: bool = Field(default=False, description="DiscoverOrganizationAccounts")
    organization_id: str | None = Field(default=None, description="OrganizationId")
    workers: int = Field(default=DEFAULTS.inventory_workers, ge=1, le=64, description="ExpertSettings inventory_workers")
    opt_out_tag: str = Field(default=DEFAULTS.opt_out_tag, description="ExpertSettings opt_out_tag")
    events_topic_name: str | None = Field(default=None, description="the member Regions' events topic (template.yaml Fixed EventsTopicName)")
    hub_account: str | None = Field(default=None, description="the stack's account (AWS::AccountId)")
    run_seconds: float = Field(default=810.0, gt=0, description="the Inventory function's Timeout less 90 s")

    @field_validator("member_accounts", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):  # a CommaDelimitedList parameter arrives as "a,b" (or "")
            return [a.strip() for a in value.split(",") if a.strip()]
        return value

    @field_validator("member_accounts")
    @classmethod
    def _accounts(cls, value: list[str]) -> list[str]:
        bad = [a for a in value if not ACCOUNT_RE.fullmatch(a)]
        if bad:
            raise ValueError(f"MemberAccounts: {', '.join(bad)} is not a 12-digit account id; list ids like 111122223333")
        return value

    @field_validator("opt_out_tag")
    @classmethod
    def _tag(cls, value: str) -> str:
        if not re.fullmatch(r"[^=]{1,128}=[^=]{0,256}", value):
            raise ValueError("ExpertSettings opt_out_tag must be key=value (e.g. replmon:probe=off): a tag key up to 128 characters, '=', "
                             "and its value")
        return value

    @property
    def opt_out(self) -> tuple[str, str]:
        key, _, value = self.opt_out_tag.partition("=")
        return key, value

    def opted_out(self, tags: Mapping[str, str]) -> bool:
        key, value = self.opt_out
        return tags.get(key) == value


def load_inventory_settings(raw: Mapping[str, Any]) -> InventorySettings:
    try:
        return InventorySettings.model_validate(dict(raw))
    except ValidationError as exc:
        raise config_error(f"inventory settings ({ENV})", exc) from None


def account_list(settings: InventorySettings, hub_account: str, organization: Callable[[], Iterable[str]] | None = None) -> list[str]:
    """The accounts to read, each once: the hub's, the listed ones, then the organization's (when
    discovery is on: ``organization`` is Organizations ListAccounts, ACTIVE only)."""
    if not ACCOUNT_RE.fullmatch(hub_account):
        raise ConfigError(f"hub account {hub_account!r} is not a 12-digit account id")
    out = [hub_account]
    extra: list[str] = list(settings.member_accounts)
    if settings.discover_organization:
        if organization is None:
            raise ConfigError("DiscoverOrganizationAccounts=true needs Organizations ListAccounts; list MemberAccounts instead")
        extra += list(organization())
    for account in extra:
        if account not in out:
            out.append(account)
    return out
