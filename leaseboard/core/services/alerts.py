"""Open alerts exactly once, whoever notices the event first (a sweep, a lazy expiry at
acquire or renew, a refused stale effect, a recipient report).

`alerts_open` inserts with ON CONFLICT (dedupe_key) DO NOTHING, folds recurrences of one
(agent, kind) into the open incident (`alerts_fold`), and sends
`leaseboard.core.signals.alerts_opened` (the notification fan-out listens) only about the
alerts this call opened that remain incidents of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Field
from django.db.models.functions import Coalesce

from leaseboard.core import sql
from leaseboard.core.authority import Actor, agent_queues_of, authorize, authorize_who
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, AlertSnooze, Effect, Executor, Lease
from leaseboard.core.services.audit import audit_act
from leaseboard.core.signals import alerts_opened
from leaseboard.domain import reconciliation as rc
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


def _column_field(name: str) -> Field[Any, Any]:
    field = Alert._meta.get_field(name)
    assert isinstance(field, Field), name  # _FIELDS names columns, not relations
    return field


def alerts_open(alerts: list[Alert]) -> list[int]:
    """Insert alerts, skipping any whose dedupe_key exists. Returns the ids opened now."""
    if not alerts:
        return []
    fields = [_column_field(name) for name in _FIELDS]
    names = [f.column for f in fields]
    columns = ", ".join(connection.ops.quote_name(name) for name in names)
    types = [f.cast_db_type(connection) or "text" for f in fields]  # type: ignore[attr-defined]
    opened: list[int] = []
    for start in range(0, len(alerts), 500):
        chunk = alerts[start : start + 500]
        rows = []
        for alert in chunk:
            alert.acknowledge_note = alert.acknowledge_note or ""
            rows.append([f.get_db_prep_save(getattr(alert, f.attname), connection) for f in fields])
        # One array per column on PostgreSQL (core.sql.rows_source), not a parameter per
        # value; `WHERE true` lets SQLite parse the upsert after a SELECT.
        source = sql.rows_source(connection.vendor, types, len(chunk), names)
        statement = (
            f"INSERT INTO {Alert._meta.db_table} ({columns}) SELECT {', '.join(names)} "
            f"FROM {source} WHERE true ON CONFLICT (dedupe_key) DO NOTHING RETURNING id"
        )
        with connection.cursor() as cursor:
            cursor.execute(statement, sql.rows_params(connection.vendor, rows))
            opened.extend(int(r[0]) for r in cursor.fetchall())
    # Recurrences folded into an open incident are opened (and counted) but not notified.
    notify = alerts_fold(opened)
    if notify:
        alerts_opened.send(sender=Alert, alert_ids=notify)
    return opened


# Kinds whose recurrences for one agent are one incident. Not recipient refusals (counted per
# incident already), outage summaries or expired takeover requests (about no agent's lease).
FOLDING_KINDS = (
    Alert.Kind.JEOPARDY.value,
    Alert.Kind.EXPIRED.value,
    Alert.Kind.STANDING_LAPSED.value,
    Alert.Kind.STALE_EFFECT.value,
    Alert.Kind.NEEDS_RECONCILIATION.value,
)


def alerts_fold(ids: list[int]) -> list[int]:
    """Fold the alerts just opened (`ids`, in the caller's transaction) into the open
    incident of their (agent, kind): one that is unresolved and was last seen within
    LEASEBOARD_ALERT_FOLD_WINDOW_MS. The incident counts them (`occurrences`, and
    `last_seen_at_ms`); each folded row keeps its own facts (lease, epoch, message), is
    resolved at once and points at the incident. Alerts of one (agent, kind) opened together
    fold into the first of them. Returns the ids that remain incidents of their own, the
    only ones to notify about. Two queries, and one update per incident touched."""
    window = settings.LEASEBOARD_ALERT_FOLD_WINDOW_MS
    if not ids or not window:
        return ids
    fresh = list(
        Alert.objects.filter(id__in=ids, kind__in=FOLDING_KINDS, lease__isnull=False)
        .order_by("id")
        .values_list("id", "kind", "lease__holder_id", "opened_at_ms")
    )
    if not fresh:
        return ids
    now = max(at for *_, at in fresh)
    incidents: dict[tuple[int, str], int] = {}
    for alert_id, kind, holder in (
        Alert.objects.filter(
            resolved_at_ms__isnull=True,
            folded_into__isnull=True,
            kind__in={kind for _, kind, _, _ in fresh},
            lease__holder_id__in={holder for _, _, holder, _ in fresh},
        )
        .exclude(id__in=ids)
        .annotate(seen=Coalesce("last_seen_at_ms", "opened_at_ms"))
        .filter(seen__gte=now - window)
        .order_by("-id")
        .values_list("id", "kind", "lease__holder_id")
    ):
        incidents.setdefault((holder, kind), alert_id)
    folded: dict[int, list[int]] = {}
    for alert_id, kind, holder, _ in fresh:
        target = incidents.setdefault((holder, kind), alert_id)
        if target != alert_id:
            folded.setdefault(target, []).append(alert_id)
    if not folded:
        return ids
    for target, rows in folded.items():
        Alert.objects.filter(id__in=rows).update(folded_into_id=target, resolved_at_ms=now)
        Alert.objects.filter(id=target).update(
            occurrences=F("occurrences") + len(rows), last_seen_at_ms=now
        )
    gone = {alert_id for rows in folded.values() for alert_id in rows}
    return [alert_id for alert_id in ids if alert_id not in gone]


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


def expiry_alert(lease: Lease, now_ms: int, outage: dict[str, Any] | None = None) -> Alert:
    """The alert of an expiry. With `outage` (the sweeps' window, leaseboard.sweeps: the
    database was unavailable and the holder has not renewed since) it names that cause
    instead of blaming the holder: nothing could renew while the database was away."""
    if lease.holder.kind == Executor.Kind.HUMAN:
        kind, message = Alert.Kind.STANDING_LAPSED, f"human standing of {lease.holder.name} lapsed"
    else:
        kind, message = (
            Alert.Kind.EXPIRED,
            f"{lease.holder.name} stopped renewing; the lease expired",
        )
    if outage is not None:
        gap_s = (outage["outage_to_ms"] - outage["outage_from_ms"]) / 1000
        message = (
            f"the database was unavailable for {gap_s:.1f} s; {lease.holder.name} has not "
            "renewed since, and the lease expired after its recovery grace"
        )
    alert = lease_alert(lease, kind, message, due_at_ms=lease.expires_at_ms, now_ms=now_ms)
    if outage is not None:
        alert.detail = {**alert.detail, **outage}
    return alert


# Effects named in a needs_reconciliation alert's detail (the page lists them all).
RECONCILIATION_EFFECTS_NAMED = 5


def reconciliation_alerts_open(leases: list[Lease], now_ms: int) -> list[int]:
    """One `needs_reconciliation` alert per work item that these ended leases leave with
    effects of no known outcome and nobody holding it (an expiry, a lapse, a release, an
    operator's revoke; not a takeover, which hands the item to a person at once). Unique per
    (work item, epoch of the lease that ended): raised once per lost holder, resolved when
    the last of its effects is reconciled. One query over effect_unreconciled_idx."""
    by_item = {lease.work_item_id: lease for lease in leases}
    if not by_item:
        return []
    effects: dict[int, list[dict[str, Any]]] = {}
    rows = (
        Effect.objects.filter(
            work_item_id__in=list(by_item),
            decision=rc.Decision.AUTHORIZED.value,
            resolution="",
            outcome__in=["", rc.Outcome.UNKNOWN.value],
        )
        .order_by("work_item_id", "proposed_at_ms")
        .values_list("work_item_id", "id", "kind", "target", "epoch", "outcome")
    )
    for item_id, effect_id, kind, target, epoch, outcome in rows:
        effects.setdefault(item_id, []).append(
            {
                "id": str(effect_id),
                "kind": kind,
                "target": target[:200],
                "epoch": epoch,
                "outcome": outcome or "none reported",
            }
        )
    alerts = []
    for item_id, found in effects.items():
        lease = by_item[item_id]
        named = ", ".join(f"{e['kind']} on {e['target']}" for e in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        alerts.append(
            Alert(
                kind=Alert.Kind.NEEDS_RECONCILIATION,
                dedupe_key=f"{Alert.Kind.NEEDS_RECONCILIATION.value}:{item_id}:{lease.epoch}",
                lease_id=lease.id,
                work_item_id=item_id,
                epoch=lease.epoch,
                message=(
                    f"{lease.holder.name} no longer holds the work ({lease.state}) and "
                    f"{len(found)} effect{'s' if len(found) != 1 else ''} have no known "
                    f"outcome: {named}{more}; it is blocked until someone reconciles them"
                )[:500],
                detail={
                    "holder": lease.holder.name,
                    "holder_kind": lease.holder.kind,
                    "ended": lease.state,
                    "effects": found[:RECONCILIATION_EFFECTS_NAMED],
                    "effect_count": len(found),
                },
                due_at_ms=lease.ended_at_ms or now_ms,
                opened_at_ms=now_ms,
            )
        )
    return alerts_open(alerts)


def reconciliation_alerts_resolve_if_done(*, work_item_id: int, now_ms: int) -> int:
    """Resolve the item's needs_reconciliation alerts once none of its effects is left
    without a known outcome. Returns how many were resolved."""
    left = Effect.objects.filter(
        work_item_id=work_item_id,
        decision=rc.Decision.AUTHORIZED.value,
        resolution="",
        outcome__in=["", rc.Outcome.UNKNOWN.value],
    ).exists()
    if left:
        return 0
    return alerts_resolve(
        work_item_id=work_item_id, kind=Alert.Kind.NEEDS_RECONCILIATION, now_ms=now_ms
    )


def alerts_resolve(
    *,
    now_ms: int,
    lease: Lease | None = None,
    work_item_id: int | None = None,
    kind: str | None = None,
    keep_kinds: tuple[str, ...] = (),
) -> int:
    """Resolve the open alerts about one lease or one work item (optionally of one kind,
    or all but `keep_kinds`). Returns how many were open."""
    if lease is None and work_item_id is None:
        raise ValueError("resolve the alerts of a lease or of a work item")
    qs = Alert.objects.filter(resolved_at_ms__isnull=True)
    if lease is not None:
        qs = qs.filter(lease=lease)
    if work_item_id is not None:
        qs = qs.filter(work_item_id=work_item_id)
    if kind is not None:
        qs = qs.filter(kind=kind)
    if keep_kinds:
        qs = qs.exclude(kind__in=keep_kinds)
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
    authorize_who(Act.ACKNOWLEDGE_ALERT, actor)
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
    _acknowledge_authorized(actor, work_item_id=alert.work_item_id, lease_id=alert.lease_id)
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


# -- groups: one agent's alerts of one kind -------------------------------------------------

GROUPS_MAX = 200
SNOOZE_MAX_MINUTES = 7 * 24 * 60


def parse_alert_groups(raw: list[str]) -> list[tuple[int | None, str]]:
    """Groups as forms name them ("<agent id>:<kind>", 0 for no agent), each once."""
    groups: list[tuple[int | None, str]] = []
    for value in dict.fromkeys(raw):
        agent, _, kind = str(value).partition(":")
        if kind not in Alert.Kind.values or not agent.isdigit():
            raise ValidationFailed(f"not an alert group: {str(value)[:60]!r}", param="group")
        groups.append((int(agent) or None, kind))
    if not groups:
        raise ValidationFailed("select at least one group of alerts", param="group")
    if len(groups) > GROUPS_MAX:
        raise ValidationFailed(f"at most {GROUPS_MAX} groups at once", param="group")
    return groups


def _acknowledge_authorized(
    actor: Actor,
    *,
    work_item_id: int | None = None,
    lease_id: Any = None,
    agent_id: int | None = None,
) -> None:
    """Decide ACKNOWLEDGE_ALERT in the queue of what the alert is about: its work item's,
    else the agent's queues (a group of one agent's alerts); a person scoped to queues
    acknowledges nothing whose queue is unknown (docs/design.md §9)."""
    if not actor.scoped:
        authorize(Act.ACKNOWLEDGE_ALERT, actor)
        return
    if work_item_id is None and lease_id is not None:
        work_item_id = Lease.objects.filter(id=lease_id).values_list("work_item_id", flat=True)[0]
    if work_item_id is not None:
        authorize(Act.ACKNOWLEDGE_ALERT, actor, work_item_id=work_item_id)
        return
    agent = Executor.objects.filter(id=agent_id).first() if agent_id else None
    if agent is None:
        authorize(Act.ACKNOWLEDGE_ALERT, actor)  # about no queue: roles held everywhere
        return
    authorize(Act.ACKNOWLEDGE_ALERT, actor, agent_queues=agent_queues_of(agent))


def _group_filter(agent_id: int | None, kind: str):  # type: ignore[no-untyped-def]
    from django.db.models import Q

    agent = Q(lease__holder_id=agent_id) if agent_id else Q(lease__isnull=True)
    return agent & Q(kind=kind)


def _group_name(agent_id: int | None, kind: str) -> str:
    return f"{agent_id or 0}:{kind}"


def _group_audited(
    action: str,
    group: tuple[int | None, str],
    *,
    actor: Actor,
    now: int,
    note: str,
    before: dict[str, Any],
    after: dict[str, Any],
    request_id: str,
) -> None:
    """One audit entry for an act on a group of alerts (an agent's alerts of one kind):
    acknowledging and snoozing are both ACKNOWLEDGE_ALERT."""
    audit_act(
        act=Act.ACKNOWLEDGE_ALERT,
        actor=actor,
        action=action,
        object_type="alert_group",
        object_id=_group_name(*group),
        at_ms=now,
        reason=note,
        before=before,
        after=after,
        request_id=request_id,
    )


def _note_checked(note: str) -> str:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("say what you are doing about it", param="note")
    if len(note) > NOTE_MAX:
        raise ValidationFailed(f"the note is limited to {NOTE_MAX} characters", param="note")
    return note


@transaction.atomic(durable=True)
def alerts_acknowledge_groups(
    *,
    groups: list[str],
    upto_id: int,
    actor: Actor,
    note: str,
    request_id: str = "",
) -> int:
    """Acknowledge, with one note, every open unacknowledged alert of the chosen groups up
    to `upto_id` (the newest the person saw: one opened after it is not acknowledged
    unseen). One audit entry per group. Returns how many alerts were acknowledged."""
    authorize_who(Act.ACKNOWLEDGE_ALERT, actor)
    note = _note_checked(note)
    parsed = parse_alert_groups(groups)
    for agent_id, _kind in parsed:  # a group is one agent's: decided in its queues
        _acknowledge_authorized(actor, agent_id=agent_id)
    now = db_now_ms()
    total = 0
    for agent_id, kind in parsed:
        ids = list(
            Alert.objects.select_for_update(no_key=True, of=("self",))
            .filter(
                _group_filter(agent_id, kind),
                id__lte=upto_id,
                resolved_at_ms__isnull=True,
                acknowledged_at_ms__isnull=True,
            )
            .values_list("id", flat=True)
        )
        if not ids:
            continue
        Alert.objects.filter(id__in=ids).update(
            acknowledged_at_ms=now, acknowledged_by_id=actor.user_id, acknowledge_note=note
        )
        total += len(ids)
        _group_audited(
            "alert.acknowledge_group",
            (agent_id, kind),
            actor=actor,
            now=now,
            note=note,
            before={"acknowledged": 0, "open": len(ids)},
            after={"acknowledged": len(ids), "upto_id": upto_id, "alert_ids": ids[:100]},
            request_id=request_id,
        )
    return total


@transaction.atomic(durable=True)
def alerts_snooze_groups(
    *,
    groups: list[str],
    minutes: int,
    actor: Actor,
    note: str,
    request_id: str = "",
) -> list[AlertSnooze]:
    """Hide the chosen groups from the badge and the default view for `minutes`, new alerts
    of those groups included; they come back by themselves. Snoozing is an acknowledgement
    with a deadline, so it is the same act (ACKNOWLEDGE_ALERT) in the authority table."""
    authorize_who(Act.ACKNOWLEDGE_ALERT, actor)
    note = _note_checked(note)
    parsed = parse_alert_groups(groups)
    for agent_id, _kind in parsed:
        _acknowledge_authorized(actor, agent_id=agent_id)
    if not isinstance(minutes, int) or not 1 <= minutes <= SNOOZE_MAX_MINUTES:
        raise ValidationFailed(f"snooze for 1 to {SNOOZE_MAX_MINUTES} minutes", param="minutes")
    now = db_now_ms()
    snoozes = []
    for agent_id, kind in parsed:
        snooze = AlertSnooze.objects.create(
            executor_id=agent_id,
            kind=kind,
            until_ms=now + minutes * 60_000,
            snoozed_by_id=actor.human_user_id,
            note=note,
            created_at_ms=now,
        )
        snoozes.append(snooze)
        _group_audited(
            "alert.snooze_group",
            (agent_id, kind),
            actor=actor,
            now=now,
            note=note,
            before={},
            after={"until_ms": snooze.until_ms, "minutes": minutes},
            request_id=request_id,
        )
    return snoozes
