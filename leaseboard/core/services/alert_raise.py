"""Raise alerts exactly once, whoever notices the event first (a sweep, a lazy expiry at
acquire or renew, a refused stale effect, a recipient report).

`alerts_open` inserts with ON CONFLICT (dedupe_key) DO NOTHING, folds recurrences of one
(agent, kind) into the open incident and bursts across agents into one incident of their
queue (leaseboard.core.services.alert_folding), and sends
`leaseboard.core.signals.alerts_opened` (the notification fan-out listens) only about the
alerts this call opened that remain incidents of their own. The alert a lease event raises
is built here too (`lease_alert`, `expiry_alert`).
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field

from leaseboard.core import sql
from leaseboard.core.models import Alert, Executor, Lease
from leaseboard.core.services.alert_folding import alerts_fold
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


def _column_field(name: str) -> Field[Any, Any]:
    field = Alert._meta.get_field(name)
    assert isinstance(field, Field), name  # _FIELDS names columns, not relations
    return field


def alerts_open(alerts: list[Alert]) -> list[int]:
    """Insert alerts, skipping any whose dedupe_key exists. Returns the ids opened now."""
    if not alerts:
        return []
    # The connection itself, looked up once: `connection` is a proxy that finds this
    # thread's connection on every attribute read, and a storm's batch reads it per value.
    conn = connections[DEFAULT_DB_ALIAS]
    fields = [_column_field(name) for name in _FIELDS]
    names = [f.column for f in fields]
    columns = ", ".join(conn.ops.quote_name(name) for name in names)
    types = [f.cast_db_type(conn) or "text" for f in fields]  # type: ignore[attr-defined]
    opened: list[int] = []
    for start in range(0, len(alerts), 500):
        chunk = alerts[start : start + 500]
        rows = []
        for alert in chunk:
            alert.acknowledge_note = alert.acknowledge_note or ""
            rows.append([f.get_db_prep_save(getattr(alert, f.attname), conn) for f in fields])
        # One array per column on PostgreSQL (core.sql.rows_source), not a parameter per
        # value; `WHERE true` lets SQLite parse the upsert after a SELECT.
        source = sql.rows_source(conn.vendor, types, len(chunk), names)
        statement = (
            f"INSERT INTO {Alert._meta.db_table} ({columns}) SELECT {', '.join(names)} "
            f"FROM {source} WHERE true ON CONFLICT (dedupe_key) DO NOTHING RETURNING id"
        )
        with conn.cursor() as cursor:
            cursor.execute(statement, sql.rows_params(conn.vendor, rows))
            opened.extend(int(r[0]) for r in cursor.fetchall())
    # Recurrences folded into an open incident are opened (and counted) but not notified.
    notify = alerts_fold(opened)
    if notify:
        alerts_opened.send(sender=Alert, alert_ids=notify)
    return opened


def lease_alert_key(kind: str, lease_id: Any, epoch: int) -> str:
    """The dedupe key of a lease event's alert: one per (kind, lease, epoch)."""
    return f"{kind}:{lease_id}:{epoch}"


def lease_alert(lease: Lease, kind: str, message: str, *, due_at_ms: int, now_ms: int) -> Alert:
    """An alert about one lease event; one per (kind, lease, epoch) by its dedupe key."""
    return Alert(
        kind=kind,
        dedupe_key=lease_alert_key(kind, lease.id, lease.epoch),
        lease_id=lease.id,
        work_item_id=lease.work_item_id,
        epoch=lease.epoch,
        message=message[:500],
        detail={"holder": lease.holder.name, "holder_kind": lease.holder.kind},
        due_at_ms=due_at_ms,
        opened_at_ms=now_ms,
    )


# The kinds an expiry's alert is (`expiry_alert_words`): an agent's lease, a person's standing.
EXPIRY_KINDS = (Alert.Kind.EXPIRED.value, Alert.Kind.STANDING_LAPSED.value)


def expiry_alert_kind(holder_kind: str) -> str:
    """The kind of an expiry's alert: a person's standing lapsed, an agent's lease expired."""
    if holder_kind == Executor.Kind.HUMAN:
        return Alert.Kind.STANDING_LAPSED.value
    return Alert.Kind.EXPIRED.value


def expiry_alert_words(
    holder_name: str, holder_kind: str, outage: dict[str, Any] | None = None
) -> tuple[str, str, dict[str, Any]]:
    """The kind, message and detail of an expiry's alert. With `outage` (the sweeps'
    window, leaseboard.sweeps: the database was unavailable and the holder has not renewed
    since) it names that cause instead of blaming the holder: nothing could renew while
    the database was away."""
    kind = expiry_alert_kind(holder_kind)
    if kind == Alert.Kind.STANDING_LAPSED.value:
        message = f"human standing of {holder_name} lapsed"
    else:
        message = f"{holder_name} stopped renewing; the lease expired"
    if outage is not None:
        gap_s = (outage["outage_to_ms"] - outage["outage_from_ms"]) / 1000
        message = (
            f"the database was unavailable for {gap_s:.1f} s; {holder_name} has not "
            "renewed since, and the lease expired after its recovery grace"
        )
    return (
        kind,
        message[:500],
        {"holder": holder_name, "holder_kind": holder_kind, **(outage or {})},
    )


def expiry_alert(lease: Lease, now_ms: int, outage: dict[str, Any] | None = None) -> Alert:
    """The alert of a lease's expiry (`expiry_alert_words`)."""
    kind, message, detail = expiry_alert_words(lease.holder.name, lease.holder.kind, outage)
    alert = lease_alert(lease, kind, message, due_at_ms=lease.expires_at_ms, now_ms=now_ms)
    alert.detail = detail
    return alert
