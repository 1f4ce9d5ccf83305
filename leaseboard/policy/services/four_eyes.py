"""Four-eyes: whether a change that loosens a rule or empowers a person waits for a second
admin. One setting in the database for every process and every path (the settings pages,
`config apply`, the management commands); LEASEBOARD_POLICY_FOUR_EYES=true is kept as a
floor (a process started with it applies four-eyes whatever the database says; false does
nothing). Turning it on takes one admin; turning it off is itself a proposal a second admin
approves, so one admin can never switch it off to act alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from leaseboard.core.authority import Actor, authorize
from leaseboard.domain.authority import Act, Role
from leaseboard.domain.errors import ValidationFailed
from leaseboard.policy.models import FourEyes, PolicyChange
from leaseboard.policy.services.common import audited


def _row_locked() -> FourEyes:
    # Every decision that asks "is four-eyes on?" holds this row until it commits, so a
    # concurrent turn-off cannot slip between the question and the change it decides.
    row = FourEyes.objects.select_for_update(no_key=True).filter(id=1).first()
    if row is None:  # a truncated table (tests) or a database from before migration 0003
        row, _ = FourEyes.objects.get_or_create(id=1)
        row = FourEyes.objects.select_for_update(no_key=True).get(id=1)
    return row


def four_eyes_forced() -> bool:
    """This process's floor (LEASEBOARD_POLICY_FOUR_EYES=true)."""
    return bool(settings.LEASEBOARD_POLICY_FOUR_EYES)


def four_eyes_stored() -> bool:
    """The database's setting alone (what `config export` writes)."""
    return FourEyes.objects.filter(id=1, on=True).exists()


def four_eyes_on() -> bool:
    """For display: the setting now (the floor, or the database's)."""
    return four_eyes_forced() or four_eyes_stored()


def four_eyes_on_locked() -> bool:
    """For a decision, inside the caller's transaction: the setting, with its row locked."""
    on = _row_locked().on
    return on or four_eyes_forced()


def active_admin_count() -> int:
    return (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=Role.ADMIN.value))
        .distinct()
        .count()
    )


@dataclass(frozen=True)
class FourEyesChange:
    changed: bool  # False: it already was so
    on: bool  # the database's setting after the call
    proposal: PolicyChange | None = None  # turning off waits for a second admin


def four_eyes_change_locked(
    *, on: bool, actor: Actor, note: str = "", request_id: str = ""
) -> FourEyesChange:
    """Turn four-eyes on (at once; two active admins needed, one to decide the other's
    proposals), or propose turning it off (a second admin approves), in the caller's
    transaction."""
    authorize(Act.CHANGE_FOUR_EYES, actor)
    row = _row_locked()
    if row.on == on:
        return FourEyesChange(False, row.on)
    if on:
        if active_admin_count() < 2:
            raise ValidationFailed(
                "four-eyes needs two active admins (one decides the other's proposals): "
                "make a second admin first",
                param="four_eyes",
            )
        four_eyes_write_locked(row, on=True, actor=actor, reason=note, request_id=request_id)
        return FourEyesChange(True, True)
    try:
        with transaction.atomic():
            proposal = PolicyChange.objects.create(
                kind=PolicyChange.Kind.FOUR_EYES,
                payload={"on": False},
                summary=(note or "turn four-eyes off")[:300],
                requested_by_id=actor.user_id,
                requested_by_name=actor.name,
            )
    except IntegrityError:
        raise ValidationFailed("turning four-eyes off already waits for a second admin") from None
    audited(
        Act.CHANGE_FOUR_EYES,
        actor,
        action="four_eyes.change_proposed",
        object_type="four_eyes",
        object_id="1",
        before={"on": True},
        after={"on": False},
        reason=f"change {proposal.pk}: {proposal.summary}",
        request_id=request_id,
    )
    return FourEyesChange(True, True, proposal)


four_eyes_set = transaction.atomic(durable=True)(four_eyes_change_locked)


def four_eyes_write_locked(
    row: FourEyes, *, on: bool, actor: Actor, reason: str = "", request_id: str = ""
) -> None:
    before = row.on
    row.on, row.changed_at, row.changed_by_name = on, timezone.now(), actor.name[:150]
    row.save(update_fields=["on", "changed_at", "changed_by_name"])
    audited(
        Act.CHANGE_FOUR_EYES,
        actor,
        action="four_eyes.on" if on else "four_eyes.off",
        object_type="four_eyes",
        object_id="1",
        before={"on": before},
        after={"on": on},
        reason=reason,
        request_id=request_id,
    )


def four_eyes_apply_locked(change: PolicyChange, actor: Actor) -> None:
    """A second admin approved turning four-eyes off."""
    row = _row_locked()
    four_eyes_write_locked(
        row,
        on=bool(change.payload.get("on")),
        actor=actor,
        reason=f"change {change.pk} by {change.requested_by_name}",
    )
