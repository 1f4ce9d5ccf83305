"""People who sign in: create one (a generated password, shown once), set their roles,
the break-glass permission and whether they may sign in, reset a password. All audited
before -> after; at least one active admin always remains."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import IntegrityError, transaction
from django.db.models import Q

from leaseboard.core.authority import BREAK_GLASS_PERMISSION, Actor, authorize
from leaseboard.core.services.users import password_problems, user_locked
from leaseboard.domain.authority import Act, Role
from leaseboard.policy.services.common import SettingsInvalid, audited

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

ROLE_NAMES = tuple(role.value for role in Role)
_APP, _CODENAME = BREAK_GLASS_PERMISSION.split(".")


def _break_glass_perm() -> Permission:
    return Permission.objects.get(codename=_CODENAME, content_type__app_label=_APP)


def person_snapshot(user: User) -> dict[str, Any]:
    return {
        "username": user.get_username(),
        "roles": sorted(user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True)),
        "break_glass": user.user_permissions.filter(
            codename=_CODENAME, content_type__app_label=_APP
        ).exists(),
        "active": user.is_active,
    }


def _roles_checked(roles: list[str]) -> list[Group]:
    unknown = sorted(set(roles) - set(ROLE_NAMES))
    if unknown:
        raise SettingsInvalid({"roles": f"{unknown[0]!r} is not a role ({', '.join(ROLE_NAMES)})"})
    groups = list(Group.objects.filter(name__in=set(roles)))
    if len(groups) != len(set(roles)):
        raise SettingsInvalid({"roles": "role groups are missing; run `manage.py migrate`"})
    return groups


def active_admins() -> int:
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=Role.ADMIN.value))
        .distinct()
        .count()
    )


def _person_audited(
    actor: Actor,
    action: str,
    user: AbstractBaseUser,
    before: dict[str, Any] | None,
    after: dict[str, Any],
    request_id: str,
) -> None:
    audited(
        Act.MANAGE_USERS,
        actor,
        action=action,
        object_type="user",
        object_id=str(user.pk),
        before=before,
        after=after,
        request_id=request_id,
    )


@dataclass(frozen=True)
class NewPerson:
    user: AbstractBaseUser
    password: str  # shown once


@transaction.atomic(durable=True)
def person_create(
    *, username: str, roles: list[str], email: str = "", actor: Actor, request_id: str = ""
) -> NewPerson:
    authorize(Act.MANAGE_USERS, actor)
    username = (username or "").strip()
    errors: dict[str, str] = {}
    if not username or len(username) > 150:
        errors["username"] = "1 to 150 characters"
    elif get_user_model().objects.filter(username=username).exists():
        errors["username"] = f"{username!r} exists; change that person's roles instead"
    if not roles:
        errors["roles"] = "at least one role"
    if errors:
        raise SettingsInvalid(errors)
    groups = _roles_checked(roles)
    password = secrets.token_urlsafe(24)
    assert not password_problems(password, username=username, email=email)
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=username, email=email, password=password
            )
    except IntegrityError:
        raise SettingsInvalid({"username": f"{username!r} exists"}) from None
    user.groups.add(*groups)
    _person_audited(actor, "user.create", user, None, person_snapshot(user), request_id)
    return NewPerson(user, password)


def person_update_locked(
    *,
    username: str,
    roles: list[str],
    break_glass: bool,
    active: bool = True,
    actor: Actor,
    request_id: str = "",
) -> bool:
    """Set exactly these roles, break-glass and active flag; False when nothing changed."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    groups = _roles_checked(roles)
    before = person_snapshot(user)
    user.groups.remove(*Group.objects.filter(name__in=ROLE_NAMES).exclude(name__in=roles))
    user.groups.add(*groups)
    perm = _break_glass_perm()
    if break_glass:
        user.user_permissions.add(perm)
    else:
        user.user_permissions.remove(perm)
    if user.is_active != active:
        user.is_active = active
        user.save(update_fields=["is_active"])
    after = person_snapshot(user)
    if after == before:
        return False
    if active_admins() == 0:
        raise SettingsInvalid(
            {"roles": "this would leave no active admin; make someone else an admin first"}
        )
    _person_audited(actor, "user.update", user, before, after, request_id)
    return True


# The same act as its own outermost transaction (the settings page's form).
person_update = transaction.atomic(durable=True)(person_update_locked)


@transaction.atomic(durable=True)
def person_password_reset(*, username: str, actor: Actor, request_id: str = "") -> str:
    """A new generated password (shown once); the old one stops working."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    password = secrets.token_urlsafe(24)
    user.set_password(password)
    user.save(update_fields=["password"])
    after = {"username": username, "password": "(reset)"}
    _person_audited(actor, "user.password_reset", user, {"username": username}, after, request_id)
    return password
