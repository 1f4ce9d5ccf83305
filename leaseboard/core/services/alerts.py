"""Open alerts exactly once, whoever notices the event first (a sweep, a lazy expiry at
acquire or renew, a refused stale effect, a recipient report).

`alerts_open` inserts with ON CONFLICT (dedupe_key) DO NOTHING and sends
`leaseboard.core.signals.alerts_opened` (the notification fan-out listens) only about the
alerts this call opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Executor, Lease
from leaseboard.core.services.audit import audit_act
from leaseboard.core.signals import alerts_opened
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed

_FIELDS = (
    "kind",
    "dedupe_key",
    "lease",
    "work_item",
    "epoch",
    "message",
    "detail",
    "due_at_ms",
    "opened_at_ms",
    "acknowledge_note",
)


def alerts_open(alerts: list[Alert]) -> list[int]:
    """Insert alerts, skipping any whose dedupe_key exists. Returns the ids opened now."""
    if not alerts:
        return []
    fields = [Alert._meta.get_field(name) for name in _FIELDS]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    opened: list[int] = []
    for start in range(0, len(alerts), 500):
        chunk = alerts[start : start + 500]
        params: list[Any] = []
        for alert in chunk:
            alert.acknowledge_note = alert.acknowledge_note or ""
            for f in fields:
                params.append(f.get_db_prep_save(getattr(alert, f.attname), connection))
        sql = (
            f"INSERT INTO {Alert._meta.db_table} ({columns}) VALUES "
            f"{', '.join([row] * len(chunk))} ON CONFLICT (dedupe_key) DO NOTHING RETURNING id"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            opened.extend(int(r[0]) for r in cursor.fetchall())
    if opened:
        alerts_opened.send(sender=Alert, alert_ids=opened)
    return opened


def lease_alert(lease: Lease, kind: str, message: str, *, due_at_ms: int, now_ms: int) -> Alert:
    """An alert about one lease event; one per (kind, lease, epoch) by its dedupe key."""
    return Alert(
        kind=kind,
        dedupe_key=f"{kind}:{lease.id}:{lease.epoch}",
        lease_id=lease.id,
        work_item_id=lease.work_item_id,
        epoch=lease.epoch,
        message=message[:500],
        detail={"holder": lease.holder.name, "holder_kind": lease.holder.kind},
        due_at_ms=due_at_ms,
        opened_at_ms=now_ms,
    )


def expiry_alert(lease: Lease, now_ms: int) -> Alert:
    if lease.holder.kind == Executor.Kind.HUMAN:
        kind, message = Alert.Kind.STANDING_LAPSED, f"human standing of {lease.holder.name} lapsed"
    else:
        kind, message = (
            Alert.Kind.EXPIRED,
            f"{lease.holder.name} stopped renewing; the lease expired",
        )
    return lease_alert(lease, kind, message, due_at_ms=lease.expires_at_ms, now_ms=now_ms)


def alerts_resolve(
    *,
    now_ms: int,
    lease: Lease | None = None,
    work_item_id: int | None = None,
    kind: str | None = None,
) -> int:
    """Resolve the open alerts about one lease or one work item (optionally of one kind).
    Returns how many were open."""
    if lease is None and work_item_id is None:
        raise ValueError("resolve the alerts of a lease or of a work item")
    qs = Alert.objects.filter(resolved_at_ms__isnull=True)
    if lease is not None:
        qs = qs.filter(lease=lease)
    if work_item_id is not None:
        qs = qs.filter(work_item_id=work_item_id)
    if kind is not None:
        qs = qs.filter(kind=kind)
    return qs.update(resolved_at_ms=now_ms)


NOTE_MAX = 1000


@dataclass(frozen=True)
class Acknowledgement:
    alert: Alert
    changed: bool  # False when it was already acknowledged (a retried click)


@transaction.atomic(durable=True)
def alert_acknowledge(
    *, alert_id: int, actor: Actor, note: str, request_id: str = ""
) -> Acknowledgement:
    """Record who acknowledged an alert, when (database clock) and why. Idempotent: a second
    acknowledgement changes nothing and writes no audit entry."""
    authorize(Act.ACKNOWLEDGE_ALERT, actor)
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
    alert.acknowledged_at_ms = now
    alert.acknowledged_by_id = actor.user_id
    alert.acknowledge_note = note
    alert.save(update_fields=["acknowledged_at_ms", "acknowledged_by", "acknowledge_note"])
    audit_act(
        act=Act.ACKNOWLEDGE_ALERT,
        actor=actor,
        action="alert.acknowledge",
        object_type="alert",
        object_id=str(alert.id),
        work_item=alert.work_item,
        at_ms=now,
        reason=note,
        before={"acknowledged_at_ms": None, "acknowledged_by": None, "acknowledge_note": ""},
        after={
            "acknowledged_at_ms": now,
            "acknowledged_by": actor.name,
            "acknowledge_note": note,
            "kind": alert.kind,
        },
        request_id=request_id,
    )
    return Acknowledgement(alert, changed=True)
