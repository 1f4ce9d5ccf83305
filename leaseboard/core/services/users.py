"""People who sign in: create a user in roles, change a user's roles. Both audited; a
password is checked by Django's validators (AUTH_PASSWORD_VALIDATORS) before it is set.
Roles are auth groups named after leaseboard.domain.authority.Role."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from leaseboard.core.services.audit import audit_admin
from leaseboard.domain.authority import Role
from leaseboard.domain.errors import NotFound, ValidationFailed

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

ROLE_NAMES = tuple(role.value for role in Role)


def _groups(roles: list[str] | tuple[str, ...]) -> list[Group]:
    unknown = sorted(set(roles) - set(ROLE_NAMES))
    if unknown:
        raise ValidationFailed(f"unknown role {unknown[0]!r}; roles: {', '.join(ROLE_NAMES)}")
    groups = list(Group.objects.filter(name__in=set(roles)))
    if len(groups) != len(set(roles)):
        raise ValidationFailed("role groups are missing; run `manage.py migrate` first")
    return groups


def _roles_of(user: User) -> list[str]:
    return sorted(user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True))


def user_locked(username: str) -> User:
    """Lock the user row (no key update) of `username`; NotFound if there is none."""
    user = get_user_model().objects.select_for_update(no_key=True).filter(username=username).first()
    if user is None:
        raise NotFound(f"no user {username!r}")
    return user


def password_problems(password: str, *, username: str, email: str = "") -> list[str]:
    """Django's password validators' messages for this password (empty: acceptable)."""
    candidate = get_user_model()(username=username, email=email)
    try:
        password_validation.validate_password(password, user=candidate)
    except ValidationError as exc:
        return list(exc.messages)
    return []


@transaction.atomic(durable=True)
def user_create(
    *, username: str, password: str, roles: list[str], email: str = "", actor_name: str
) -> AbstractBaseUser:
    """Create a new user in `roles`. Never modifies an existing user: role changes are
    `user_roles_change`, so nothing is granted silently."""
    username = username.strip()
    if not username or len(username) > 150:
        raise ValidationFailed("a username is 1 to 150 characters", param="username")
    if not roles:
        raise ValidationFailed("a user needs at least one role", param="role")
    problems = password_problems(password, username=username, email=email)
    if problems:
        raise ValidationFailed("password refused: " + " ".join(problems), param="password")
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ValidationFailed(
            f"user {username!r} already exists; change roles with "
            f"`manage.py user_role {username} --add ROLE`",
            param="username",
        )
    groups = _groups(roles)
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email, password=password)
    except IntegrityError:
        raise ValidationFailed(f"user {username!r} already exists", param="username") from None
    user.groups.add(*groups)
    audit_admin(
        "user.create",
        "user",
        user.pk,
        actor_name=actor_name,
        after={"username": username, "email": email, "roles": sorted(g.name for g in groups)},
    )
    return user


@transaction.atomic(durable=True)
def user_roles_change(
    *,
    username: str,
    add: list[str] | tuple[str, ...] = (),
    remove: list[str] | tuple[str, ...] = (),
    actor_name: str,
    reason: str = "",
) -> tuple[list[str], list[str]]:
    """Add and remove roles of an existing user; returns (roles before, roles after). An
    actual change is audited; asking for what already holds records nothing."""
    overlap = sorted(set(add) & set(remove))
    if overlap:
        raise ValidationFailed(f"role {overlap[0]!r} is both added and removed")
    user = user_locked(username)
    to_add, to_remove = _groups(list(add)), _groups(list(remove))
    before = _roles_of(user)
    user.groups.add(*to_add)
    user.groups.remove(*to_remove)
    after = _roles_of(user)
    if after != before:
        audit_admin(
            "user.roles_change",
            "user",
            user.pk,
            actor_name=actor_name,
            reason=reason,
            before={"username": username, "roles": before},
            after={"username": username, "roles": after},
        )
    return before, after
