"""Roles as a person holds them: the role names (ROLE_NAMES, from `Role`), each for every
queue or for named queues ("operator:payments"), and break-glass beside them, in the one
textual form config as code and single sign-on mappings write (`grants_parsed`,
`grants_listed`), checked before anything is written."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import Group

from leaseboard.domain.authority import ROLE_NAMES, SCOPABLE_ROLES, Role
from leaseboard.policy.services.common import SettingsInvalid

BREAK_GLASS = "break_glass"  # in a list of grants beside the roles (config as code, SSO)
QUEUE_NAME = re.compile(r"^[-a-zA-Z0-9_]{1,100}$")  # a queue name is a slug

__all__ = [
    "BREAK_GLASS",
    "QUEUE_NAME",
    "ROLE_NAMES",
    "grants_checked",
    "grants_listed",
    "grants_noted",
    "grants_parsed",
    "roles_checked",
    "scopes_checked",
    "widened",
]


def grants_parsed(items: list[str]) -> tuple[list[str], dict[str, list[str]], bool]:
    """`role` (every queue), `role:queue` (that queue; repeat for several) and
    `break_glass`, as config as code and single sign-on mappings write them: the roles, the
    scopes (role -> queues) and break-glass. A role named both ways is held everywhere."""
    roles: set[str] = set()
    everywhere: set[str] = set()
    scopes: dict[str, set[str]] = {}
    break_glass = False
    for item in items:
        name, _, queue = item.strip().partition(":")
        if name == BREAK_GLASS and not queue:
            break_glass = True
            continue
        if name not in ROLE_NAMES:
            raise SettingsInvalid(
                {"roles": f"{name!r} is not a role ({', '.join(ROLE_NAMES)}, {BREAK_GLASS})"}
            )
        roles.add(name)
        if queue:
            scopes.setdefault(name, set()).add(queue)
        else:
            everywhere.add(name)
    listed = {role: sorted(q) for role, q in scopes.items() if role not in everywhere}
    return sorted(roles), listed, break_glass


def grants_checked(held: Any) -> tuple[list[str], dict[str, list[str]], bool]:
    """A list of grants as a file writes it (a person in config as code, a single sign-on
    group) parsed and its scopes checked; refused under `roles` saying what is wrong."""
    if not isinstance(held, list) or not all(isinstance(g, str) for g in held):
        raise SettingsInvalid({"roles": "a list of roles (`role`, or `role:queue` for one queue)"})
    roles, scopes, break_glass = grants_parsed(held)
    return roles, scopes_checked(roles, scopes), break_glass


def grants_noted(
    held: Any, errors: dict[str, str], path: str
) -> tuple[list[str], dict[str, list[str]], bool] | None:
    """`grants_checked`, for a file checked whole before anything is refused: the grants,
    or None with what is wrong noted in `errors` at `path`."""
    try:
        return grants_checked(held)
    except SettingsInvalid as exc:
        errors[path] = exc.errors.get("roles", exc.detail)
        return None


def grants_listed(snapshot: dict[str, Any]) -> list[str]:
    """The inverse of `grants_parsed`, for export: `role` or `role:queue` entries."""
    scopes = snapshot.get("scopes", {})
    out: list[str] = []
    for role in snapshot["roles"]:
        out += [f"{role}:{q}" for q in scopes[role]] if role in scopes else [role]
    return out + ([BREAK_GLASS] if snapshot["break_glass"] else [])


def scopes_checked(roles: list[str], scopes: dict[str, list[str]]) -> dict[str, list[str]]:
    """A role is held for named queues only if it is held, may be scoped (never admin) and
    names at least one well-formed queue."""
    out: dict[str, list[str]] = {}
    for role, queues in scopes.items():
        if role not in roles:
            raise SettingsInvalid({"roles": f"{role!r} is scoped to queues but not held"})
        if Role(role) not in SCOPABLE_ROLES:
            raise SettingsInvalid(
                {"roles": f"{role!r} is held for every queue (it configures the installation)"}
            )
        if not queues or not all(isinstance(q, str) and QUEUE_NAME.match(q) for q in queues):
            raise SettingsInvalid({"roles": f"{role!r}: queue names are slugs, at least one"})
        out[role] = sorted(set(queues))
    return out


def roles_checked(roles: list[str]) -> list[Group]:
    """The auth groups of `roles`, each a role; refused if one is not (or its group is
    missing)."""
    unknown = sorted(set(roles) - set(ROLE_NAMES))
    if unknown:
        raise SettingsInvalid({"roles": f"{unknown[0]!r} is not a role ({', '.join(ROLE_NAMES)})"})
    groups = list(Group.objects.filter(name__in=set(roles)))
    if len(groups) != len(set(roles)):
        raise SettingsInvalid({"roles": "role groups are missing; run `manage.py migrate`"})
    return groups


def widened(role: str, before: dict[str, Any], target: dict[str, Any]) -> bool:
    """The target holds `role` in a queue the person could not act in before."""
    if role not in before["roles"]:
        return True
    was, will = before.get("scopes", {}).get(role), target.get("scopes", {}).get(role)
    return was is not None and (will is None or bool(set(will) - set(was)))
