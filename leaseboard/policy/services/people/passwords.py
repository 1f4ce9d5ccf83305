"""Passwords nobody is shown: Django's validators for one a person chooses, the one-time
set-password link a new or reset person is handed, and the reset itself (the old password
stops working at once; under four-eyes the reset is a proposal). Never one's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.four_eyes import four_eyes_on_locked
from leaseboard.policy.services.people.guard import bootstrapping
from leaseboard.policy.services.people.records import (
    approved_reason,
    person_audited,
    propose,
    user_locked,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def password_problems(password: str, *, username: str, email: str = "") -> list[str]:
    """Django's password validators' messages for this password (empty: acceptable)."""
    candidate = get_user_model()(username=username, email=email)
    try:
        password_validation.validate_password(password, user=candidate)
    except ValidationError as exc:
        return list(exc.messages)
    return []


def set_password_link(user: User) -> str:
    """A one-time link with which the person chooses their own password (Django's
    password-reset token: it stops working once the password is set, or after
    PASSWORD_RESET_TIMEOUT)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    path = reverse("dashboard:password_set", args=[uid, token])
    return settings.LEASEBOARD_PUBLIC_URL + path


@dataclass(frozen=True)
class PasswordReset:
    link: str = ""  # the one-time set-password link ("" while proposed)
    proposal: PolicyChange | None = None


def _reset_locked(user: User, actor: Actor, request_id: str, reason: str = "") -> str:
    # The old password stops working now, and with it every session it opened.
    user.set_unusable_password()
    user.save(update_fields=["password"])
    person_audited(
        actor,
        "user.password_reset",
        user,
        {"username": user.get_username()},
        {"username": user.get_username(), "password": "(unusable until set by link)"},
        request_id,
        reason=reason,
    )
    return set_password_link(user)


@transaction.atomic(durable=True)
def person_password_reset(*, username: str, actor: Actor, request_id: str = "") -> PasswordReset:
    """The person's password stops working; they choose a new one through a one-time link
    (never shown to anyone as a password). Never one's own; under four-eyes a proposal."""
    authorize(Act.MANAGE_USERS, actor)
    user = user_locked(username)
    authorize(Act.MANAGE_USERS, actor, subject_user_id=user.pk)
    if four_eyes_on_locked() and not bootstrapping(actor):
        proposal = propose(
            PolicyChange.Kind.PASSWORD_RESET,
            actor,
            subject=user,
            payload={},
            summary=f"password of {username}: reset, set again by a one-time link",
            request_id=request_id,
        )
        return PasswordReset(proposal=proposal)
    return PasswordReset(_reset_locked(user, actor, request_id))


def password_reset_apply_locked(change: PolicyChange, actor: Actor) -> PasswordReset:
    """A second admin approved a reset: made now, with a link the approver hands over."""
    assert change.subject is not None
    user = user_locked(change.subject.get_username())
    return PasswordReset(_reset_locked(user, actor, "", reason=approved_reason(change)))
