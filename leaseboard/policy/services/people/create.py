"""Creating a person: in one or more roles (each for every queue, or for named queues),
with an unusable password until they set theirs through a one-time link (or, from the
shell only, a password given). Under four-eyes a proposal, made when a second admin
approves it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.four_eyes import four_eyes_on_locked
from leaseboard.policy.services.people.grants import roles_checked, scopes_checked
from leaseboard.policy.services.people.guard import bootstrapping, scopes_written
from leaseboard.policy.services.people.passwords import password_problems, set_password_link
from leaseboard.policy.services.people.records import (
    approved_reason,
    person_audited,
    person_snapshot,
    propose,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True)
class NewPerson:
    user: User | None  # None: waiting for a second admin (`proposal`)
    link: str = ""  # the one-time set-password link, shown once ("" with a password given)
    proposal: PolicyChange | None = None


def _username_problem(username: str, deciding: PolicyChange | None) -> str:
    if not username or len(username) > 150:
        return "1 to 150 characters"
    if get_user_model().objects.filter(username=username).exists():
        return (
            f"user {username!r} already exists; change roles with `manage.py user_role "
            f"{username} --add ROLE` or on the People page"
        )
    proposed = PolicyChange.objects.filter(
        kind=PolicyChange.Kind.PERSON_CREATE, status="pending", payload__username=username
    ).exclude(pk=deciding.pk if deciding is not None else 0)
    if proposed.exists():
        return f"{username!r} is already proposed; a second admin decides it"
    return ""


def _create_checked(
    username: str, roles: list[str], *, deciding: PolicyChange | None = None
) -> tuple[str, list[Group]]:
    username = (username or "").strip()
    errors: dict[str, str] = {}
    problem = _username_problem(username, deciding)
    if problem:
        errors["username"] = problem
    if not roles:
        errors["roles"] = "at least one role"
    if errors:
        raise SettingsInvalid(errors)
    return username, roles_checked(roles)


def _create_locked(
    username: str,
    email: str,
    groups: list[Group],
    password: str | None,
    scopes: dict[str, list[str]] | None = None,
) -> User:
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=username, email=email, password=password
            )
    except IntegrityError:
        raise SettingsInvalid({"username": f"{username!r} exists"}) from None
    # Without a password, an unusable one (Django's create_user): until set through the link.
    # A new person takes no admin away, so the last-admin guard has nothing to refuse here.
    user.groups.add(*groups)
    scopes_written(user, scopes or {})
    return user


@transaction.atomic(durable=True)
def person_create(
    *,
    username: str,
    roles: list[str],
    email: str = "",
    actor: Actor,
    password: str | None = None,
    scopes: dict[str, list[str]] | None = None,
    request_id: str = "",
) -> NewPerson:
    """A new person in `roles` (each for every queue, or for the queues `scopes` names),
    who sets their own password through a one-time link (or, from the shell only, with
    `password`). Under four-eyes, a proposal."""
    authorize(Act.MANAGE_USERS, actor)
    username, groups = _create_checked(username, roles)
    scopes = scopes_checked(roles, scopes or {})
    if password is not None:
        problems = password_problems(password, username=username, email=email)
        if problems:
            raise SettingsInvalid({"password": "password refused: " + " ".join(problems)})
    four_eyes = four_eyes_on_locked()
    if four_eyes and not bootstrapping(actor):
        if password is not None:
            raise SettingsInvalid(
                {"password": "a proposal holds no password: the person sets theirs by link"}
            )
        payload = {
            "username": username,
            "email": email,
            "roles": sorted(set(roles)),
            "scopes": scopes,
        }
        proposal = propose(
            PolicyChange.Kind.PERSON_CREATE,
            actor,
            subject=None,
            payload=payload,
            summary=f"new person {username}: {', '.join(payload['roles'])}",
            request_id=request_id,
        )
        return NewPerson(None, proposal=proposal)
    user = _create_locked(username, email, groups, password, scopes)
    person_audited(
        actor,
        "user.create",
        user,
        None,
        person_snapshot(user),
        request_id,
        reason="four-eyes, but no second admin exists yet to decide" if four_eyes else "",
    )
    return NewPerson(user, "" if password is not None else set_password_link(user))


def person_create_apply_locked(change: PolicyChange, actor: Actor) -> NewPerson:
    """A second admin approved a new person: made now, with a link the approver hands over."""
    payload = change.payload
    username, groups = _create_checked(
        str(payload.get("username", "")), payload.get("roles", []), deciding=change
    )
    scopes = scopes_checked(payload.get("roles", []), payload.get("scopes", {}))
    user = _create_locked(username, str(payload.get("email", "")), groups, None, scopes)
    person_audited(
        actor, "user.create", user, None, person_snapshot(user), "", reason=approved_reason(change)
    )
    return NewPerson(user, set_password_link(user))
