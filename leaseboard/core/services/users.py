"""What every path that changes people needs (leaseboard.policy.services.people does the
changing, for the settings pages and the management commands alike): the user row locked,
and a password checked by Django's validators (AUTH_PASSWORD_VALIDATORS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError

from leaseboard.domain.errors import NotFound

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)


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
