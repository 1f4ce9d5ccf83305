"""Acknowledging alerts, one at a time or by group (one agent's alerts of one kind), and
snoozing groups: who, when (database clock) and why, each audited; decided in the queue
of what the alert is about (docs/design.md §9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, agent_queues_of, authorize, authorize_who
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, AlertSnooze, Executor, Lease
from leaseboard.core.services.audit import audit_act
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed

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
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
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


# deliberate: a keyword-only signature, alike in shape with the services' own.
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
    # deliberate: audit_act's keywords one a line; each act records its own before and after.
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


# deliberate: keyword-only signatures, alike in shape with alerts_snooze_groups below; two acts.
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
