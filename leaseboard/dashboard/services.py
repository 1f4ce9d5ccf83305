"""Dashboard writes. Each is the outermost transaction and records its audit entry in it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert
from leaseboard.core.services.audit import audit_record
from leaseboard.domain.errors import NotFound, ValidationFailed

NOTE_MAX = 1000


@dataclass(frozen=True)
class Acknowledgement:
    alert: Alert
    changed: bool  # False when it was already acknowledged (a retried click)


@transaction.atomic(durable=True)
def alert_acknowledge(
    *,
    alert_id: int,
    user,
    role: str,
    note: str,
    request_id: str = "",  # type: ignore[no-untyped-def]
) -> Acknowledgement:
    """Record who acknowledged an alert, when (database clock) and why. Idempotent: a second
    acknowledgement changes nothing and writes no audit entry."""
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("say what you are doing about it", param="note")
    if len(note) > NOTE_MAX:
        raise ValidationFailed(f"the note is limited to {NOTE_MAX} characters", param="note")
    alert = (
        Alert.objects.select_for_update(no_key=True, of=("self",))
        .select_related("work_item")
        .filter(id=alert_id)
        .first()
    )
    if alert is None:
        raise NotFound(f"no alert {alert_id}")
    if alert.acknowledged_at_ms is not None:
        return Acknowledgement(alert, changed=False)
    now = db_now_ms()
    before = {"acknowledged_at_ms": None, "acknowledged_by": None, "acknowledge_note": ""}
    alert.acknowledged_at_ms = now
    alert.acknowledged_by = user
    alert.acknowledge_note = note
    alert.save(update_fields=["acknowledged_at_ms", "acknowledged_by", "acknowledge_note"])
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=user.get_username(),
        actor_role=role,
        action="alert.acknowledge",
        object_type="alert",
        object_id=str(alert.id),
        work_item=alert.work_item,
        reason=note,
        before=before,
        after={
            "acknowledged_at_ms": now,
            "acknowledged_by": user.get_username(),
            "acknowledge_note": note,
            "kind": alert.kind,
        },
        request_id=request_id,
    )
    return Acknowledgement(alert, changed=True)
