"""Acknowledge by query ("acknowledge all N matching this filter"): each alert by the one
acknowledgement (alerts.alert_acknowledge: the authority in the alert's queue, its own
transaction and audit entry), an outcome per alert, and the bulk audited with them all.
The grouping of alerts lives in core.services.alerts; nothing here writes an alert row."""

from __future__ import annotations

from typing import Any

from leaseboard.core.authority import Actor, authorize_who
from leaseboard.core.models import Alert
from leaseboard.core.services.alerts import alert_acknowledge
from leaseboard.core.services.bulk import (
    BulkResult,
    ItemOutcome,
    bulk_recorded,
    each_item,
    ids_checked,
)
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import NotFound, ValidationFailed

NOTE_MAX = 1000


def alerts_acknowledge_bulk(
    *,
    alert_ids: list[Any],
    actor: Actor,
    note: str,
    query: dict[str, str] | None = None,
    request_id: str = "",
) -> BulkResult:
    """Acknowledge several alerts with one note. An alert acknowledged meanwhile is
    reported as such, not acknowledged twice; one outside the actor's queues is refused
    alone."""
    authorize_who(Act.ACKNOWLEDGE_ALERT, actor)
    note = (note or "").strip()
    if not note or len(note) > NOTE_MAX:
        raise ValidationFailed(
            f"say what you are doing about it, in 1 to {NOTE_MAX} characters", param="note"
        )
    ids = ids_checked(alert_ids, what="alert", param="alert_ids")
    known = {
        str(a.id): a
        for a in Alert.objects.filter(id__in=[int(i) for i in ids if i.isdigit()])
        .select_related("work_item", "lease__holder")
        .only("id", "kind", "work_item__key", "lease__holder__name")
    }

    def named(raw: str) -> ItemOutcome:
        alert = known.get(raw)
        if alert is None:
            return ItemOutcome(raw, False)
        return ItemOutcome(raw, False, alert.work_item.key if alert.work_item else "", alert.kind)

    def one(raw: str) -> ItemOutcome:
        if raw not in known:
            raise NotFound(f"no alert {raw[:40]}")
        ack = alert_acknowledge(alert_id=int(raw), actor=actor, note=note, request_id=request_id)
        if not ack.changed:
            by = ack.alert.acknowledged_by.get_username() if ack.alert.acknowledged_by else ""
            raise ValidationFailed(f"already acknowledged{f' by {by}' if by else ''}")
        base = named(raw)
        return ItemOutcome(raw, True, base.work_key, base.about)

    return bulk_recorded(
        act=Act.ACKNOWLEDGE_ALERT,
        actor=actor,
        action="alert.acknowledge_bulk",
        outcomes=each_item(ids, one, named=named),
        reason=note,
        query=query,
        request_id=request_id,
    )
