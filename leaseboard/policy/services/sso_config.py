"""Config as code's `[sso]` table: which claim lists a person's groups, whether local
passwords still sign anyone in, and what each group gives (docs/design.md §9):

    [sso]
    groups_claim = "groups"
    local_passwords = false

    [sso.groups]
    payments-oncall = ["operator:payments"]
    sre = ["operator", "approver:deploys"]
    leaseboard-admins = ["admin"]

A mapping gives power as a person's roles do, so it is an admin's act (MANAGE_USERS), and
under four-eyes a change of it is refused here (it would give roles without a second
admin): turn four-eyes off with a second admin's approval, or make the first admins'
mapping while bootstrapping.
"""

from __future__ import annotations

from typing import Any

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act
from leaseboard.policy.models import SignInPolicy, SsoGroup
from leaseboard.policy.services import people
from leaseboard.policy.services.common import SettingsInvalid, audited
from leaseboard.policy.services.four_eyes import four_eyes_on_locked

SSO_KEYS = ("groups_claim", "local_passwords", "groups")


def sso_snapshot() -> dict[str, Any]:
    policy = SignInPolicy.objects.filter(id=1).first() or SignInPolicy()
    return {
        "groups_claim": policy.groups_claim,
        "local_passwords": policy.local_passwords,
        "groups": {g.name: list(g.grants) for g in SsoGroup.objects.order_by("name")},
    }


def sso_planned(doc: Any, errors: dict[str, str]) -> dict[str, Any] | None:
    """The `[sso]` table checked and normalised (each group's grants sorted as exported);
    problems go to `errors` under their path."""
    if not isinstance(doc, dict):
        errors["sso"] = "a table: groups_claim, local_passwords, groups"
        return None
    for key in sorted(set(doc) - set(SSO_KEYS)):
        errors[f"sso.{key}"] = f"unknown field; [sso] has {', '.join(SSO_KEYS)}"
    claim = doc.get("groups_claim", "groups")
    if not isinstance(claim, str) or not 0 < len(claim) <= 100:
        errors["sso.groups_claim"] = "a claim name of 1 to 100 characters"
    local = doc.get("local_passwords", True)
    if not isinstance(local, bool):
        errors["sso.local_passwords"] = "true or false"
    groups = doc.get("groups", {})
    out: dict[str, list[str]] = {}
    if not isinstance(groups, dict):
        errors["sso.groups"] = "a table of group name -> [roles]"
        groups = {}
    for name, grants in groups.items():
        path = f"sso.groups.{name}"
        if not 0 < len(name) <= 200:
            errors[path] = "a group name of 1 to 200 characters"
            continue
        checked = people.grants_noted(grants, errors, path)
        if checked is None:
            continue
        roles, scopes, break_glass = checked
        out[name] = people.grants_listed(
            {"roles": roles, "scopes": scopes, "break_glass": break_glass}
        )
    if any(k.startswith("sso") for k in errors):
        return None
    return {"groups_claim": claim, "local_passwords": local, "groups": out}


def sso_apply_locked(target: dict[str, Any], *, actor: Actor) -> None:
    """Write the `[sso]` table (checked by `sso_planned`), audited before -> after."""
    authorize(Act.MANAGE_USERS, actor)
    if four_eyes_on_locked() and not people.bootstrapping(actor):
        raise SettingsInvalid(
            {
                "sso": "under four-eyes the sign-in mappings give roles without a second "
                "admin: a second admin approves turning four-eyes off first"
            }
        )
    before = sso_snapshot()
    SignInPolicy.objects.update_or_create(
        id=1,
        defaults={
            "groups_claim": target["groups_claim"],
            "local_passwords": target["local_passwords"],
        },
    )
    SsoGroup.objects.exclude(name__in=list(target["groups"])).delete()
    for name, grants in target["groups"].items():
        SsoGroup.objects.update_or_create(name=name, defaults={"grants": grants})
    audited(
        Act.MANAGE_USERS,
        actor,
        action="sso.update",
        object_type="sso",
        object_id="sso",
        before=before,
        after=sso_snapshot(),
        reason="config apply",
        request_id="",
    )
