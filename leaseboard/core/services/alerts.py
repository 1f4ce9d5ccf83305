"""Open alerts exactly once, whoever notices the event first (a sweep, a lazy expiry at
acquire or renew, a refused stale effect, a recipient report).

`alerts_open` inserts with ON CONFLICT (dedupe_key) DO NOTHING and sends
`leaseboard.core.signals.alerts_opened` (the notification fan-out listens) only about the
alerts this call opened.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from leaseboard.core.models import Alert, Executor, Lease
from leaseboard.core.signals import alerts_opened

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
