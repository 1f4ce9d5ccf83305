"""A person as the people services read, audit and propose them: the locked user row, the
snapshot compared before -> after, the audit entry of every act on a person, and the
proposal a second admin decides under four-eyes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import IntegrityError, transaction

from leaseboard.core.authority import BREAK_GLASS_PERMISSION, Actor
from leaseboard.core.models import RoleScope
from leaseboard.domain.authority import ROLE_NAMES, Act
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import audited

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

_APP, _CODENAME = BREAK_GLASS_PERMISSION.split(".")


def user_locked(username: str) -> User:
    """Lock the user row (no key update) of `username`; NotFound if there is none."""
    user = get_user_model().objects.select_for_update(no_key=True).filter(username=username).first()
    if user is None:
        raise NotFound(f"no user {username!r}")
    return user


def break_glass_perm() -> Permission:
    return Permission.objects.get(codename=_CODENAME, content_type__app_label=_APP)


def person_snapshot(user: User) -> dict[str, Any]:
    """What a person may do, as audited and compared: `scopes` (role -> its queues) only
    when some role is held for named queues only."""
    snap: dict[str, Any] = {
        "username": user.get_username(),
        "roles": sorted(user.groups.filter(name__in=ROLE_NAMES).values_list("name", flat=True)),
        "break_glass": user.user_permissions.filter(
            codename=_CODENAME, content_type__app_label=_APP
        ).exists(),
        "active": user.is_active,
    }
    scopes = {
        s.role: sorted(s.queues) for s in RoleScope.objects.filter(user_id=user.pk).order_by("role")
    }
    if scopes:
        snap["scopes"] = scopes
    return snap


def person_audited(
    actor: Actor,
    action: str,
    user: User | None,
    before: dict[str, Any] | None,
    after: dict[str, Any],
    request_id: str,
    reason: str = "",
    object_id: str = "",
) -> None:
    audited(
        Act.MANAGE_USERS,
        actor,
        action=action,
        object_type="user",
        object_id=object_id or str(user.pk if user is not None else ""),
        before=before,
        after=after,
        reason=reason,
        request_id=request_id,
    )


def approved_reason(change: PolicyChange) -> str:
    """The audit reason of an act a second admin approved."""
    return f"change {change.pk} by {change.requested_by_name}"


def propose(
    kind: str,
    actor: Actor,
    *,
    subject: User | None,
    payload: dict[str, Any],
    summary: str,
    request_id: str,
) -> PolicyChange:
    """A change about a person waiting for a second admin, audited as proposed; one of a
    kind per person at a time (the table's unique constraint)."""
    try:
        with transaction.atomic():
            proposal = PolicyChange.objects.create(
                kind=kind,
                subject=subject,
                payload=payload,
                summary=summary[:300],
                requested_by_id=actor.user_id,
                requested_by_name=actor.name,
            )
    except IntegrityError:
        raise ValidationFailed(
            f"a change of this kind to {summary.split(':')[0]} already waits for a second admin"
        ) from None
    person_audited(
        actor,
        "user.change_proposed",
        subject,
        None,
        {"change": proposal.pk, "kind": kind, **payload},
        request_id,
        reason=f"change {proposal.pk}: {proposal.summary}",
        object_id=str(subject.pk) if subject is not None else str(payload.get("username", "")),
    )
    return proposal
