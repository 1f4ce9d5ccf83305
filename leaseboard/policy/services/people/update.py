"""Changing what a person may do: exactly these roles (each for every queue or for named
queues), break-glass and sign-in; never one's own. Under four-eyes what takes power away
applies at once (containment) and what gives it (a role, a queue, break-glass, sign-in) is
proposed, applied on top of what they hold then when a second admin approves it. Every
write goes through guard.write_person_locked (the last-admin guard)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.four_eyes import four_eyes_on_locked
from leaseboard.policy.services.people.grants import roles_checked, scopes_checked, widened
from leaseboard.policy.services.people.guard import bootstrapping, write_person_locked
from leaseboard.policy.services.people.records import (
    approved_reason,
    person_audited,
    person_snapshot,
    propose,
    user_locked,
)

State = dict[str, Any]  # a person_snapshot: roles, break_glass, active, scopes


@dataclass(frozen=True)
class PersonChange:
    changed: bool  # False: nothing was different
    proposal: PolicyChange | None = None  # what gives power, waiting for a second admin


def _target(
    before: State,
    *,
    roles: list[str],
    break_glass: bool,
    active: bool,
    scopes: dict[str, list[str]] | None,
) -> State:
    """The state asked for, its scopes checked (None: the scopes they have, of the roles
    they keep)."""
    if scopes is None:
        scopes = {r: q for r, q in before.get("scopes", {}).items() if r in roles}
    scopes = scopes_checked(roles, scopes)
    target = {**before, "roles": sorted(set(roles)), "break_glass": break_glass, "active": active}
    target.pop("scopes", None)
    if scopes:
        target["scopes"] = scopes
    return target


def _widened_roles(before: State, target: State) -> dict[str, list[str] | None]:
    """A role given, or held in more queues than before (both give power): role -> its
    queues in the target (None: every queue)."""
    scopes = target.get("scopes", {})
    return {r: scopes.get(r) for r in target["roles"] if widened(r, before, target)}


def _grants(before: State, target: State, wider: dict[str, list[str] | None]) -> dict[str, Any]:
    """What the change gives (a proposal's payload): roles added, break-glass, sign-in,
    and queues given (a role added for named queues, or a role held in more queues)."""
    add_roles = sorted(set(target["roles"]) - set(before["roles"]))
    grants: dict[str, Any] = {
        "add_roles": add_roles,
        "break_glass": bool(target["break_glass"] and not before["break_glass"]),
        "active": bool(target["active"] and not before["active"]),
    }
    scope_grants = {r: q for r, q in wider.items() if q is not None or r not in add_roles}
    if scope_grants:
        grants["scopes"] = scope_grants
    return grants


def _taken_away(before: State, target: State, wider: dict[str, list[str] | None]) -> State:
    """While what gives power waits for a second admin: only what takes it away, now. A role
    kept keeps its narrower scope now; a widened one keeps its old scope for now."""
    kept = sorted(set(target["roles"]) & set(before["roles"]))
    was, scopes = before.get("scopes", {}), target.get("scopes", {})
    now_scopes = {
        r: was[r] if r in wider else scopes[r]
        for r in kept
        if (r in wider and r in was) or (r not in wider and r in scopes)
    }
    now = {
        **target,
        "roles": kept,
        "break_glass": target["break_glass"] and before["break_glass"],
        "active": target["active"] and before["active"],
    }
    now.pop("scopes", None)
    if now_scopes:
        now["scopes"] = now_scopes
    return now


def _summary(username: str, wider: dict[str, list[str] | None], grants: dict, reason: str) -> str:
    wanted = [f"+{r}" + (f":{','.join(q)}" if q else "") for r, q in wider.items()]
    wanted += ["+break_glass"] * grants["break_glass"] + ["+sign-in"] * grants["active"]
    return f"person {username}: {' '.join(wanted)}" + (f" ({reason})" if reason else "")


def person_update_locked(
    *,
    username: str,
    roles: list[str],
    break_glass: bool,
    active: bool = True,
    scopes: dict[str, list[str]] | None = None,
    actor: Actor,
    reason: str = "",
    request_id: str = "",
) -> PersonChange:
    """Set exactly these roles (each for every queue, or for the queues `scopes` names;
    None: the scopes they have), break-glass and sign-in; never one's own. Under four-eyes
    what takes power away applies now and what gives it (a role, a queue) is proposed."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    authorize(Act.MANAGE_USERS, actor, subject_user_id=user.pk)
    roles_checked(roles)
    before = person_snapshot(user)
    target = _target(before, roles=roles, break_glass=break_glass, active=active, scopes=scopes)
    if target == before:
        return PersonChange(False)
    wider = _widened_roles(before, target)
    grants = _grants(before, target, wider)
    four_eyes = four_eyes_on_locked()
    proposing = four_eyes and any(grants.values()) and not bootstrapping(actor)
    now = _taken_away(before, target, wider) if proposing else target
    if now != before:
        write_person_locked(user, now, before=before)
        person_audited(
            actor, "user.update", user, before, person_snapshot(user), request_id, reason=reason
        )
    if not proposing:
        return PersonChange(True)
    proposal = propose(
        PolicyChange.Kind.PERSON,
        actor,
        subject=user,
        payload=grants,
        summary=_summary(username, wider, grants, reason),
        request_id=request_id,
    )
    return PersonChange(True, proposal)


# The same act as its own outermost transaction (the settings page's form).
person_update = transaction.atomic(durable=True)(person_update_locked)


def person_grants_apply_locked(change: PolicyChange, actor: Actor) -> None:
    """A second admin approved what a change gives a person, on top of what they have now."""
    assert change.subject is not None
    user = user_locked(change.subject.get_username())
    before = person_snapshot(user)
    grants = change.payload
    roles = sorted(set(before["roles"]) | set(grants.get("add_roles", [])))
    scopes = dict(before.get("scopes", {}))
    for role, queues in grants.get("scopes", {}).items():  # None: every queue
        if role not in roles:
            continue  # taken away since it was proposed
        if queues is None:
            scopes.pop(role, None)
        else:
            scopes[role] = queues
    after = {
        **before,
        "roles": roles,
        "break_glass": before["break_glass"] or bool(grants.get("break_glass")),
        "active": before["active"] or bool(grants.get("active")),
        "scopes": scopes_checked(roles, scopes),
    }
    write_person_locked(user, after, before=before)
    written = person_snapshot(user)
    person_audited(actor, "user.update", user, before, written, "", reason=approved_reason(change))
