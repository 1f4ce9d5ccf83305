"""Alerts as incidents: recurrences of one (agent, kind) fold into the open incident
(`alerts_fold`), and what remains, when many agents' alerts of one kind arrive in one
queue at once, is grouped into one incident of the queue
(leaseboard.core.services.alert_bursts). A folded row keeps its own facts (lease, epoch,
message), is resolved at once and points at its incident; only incidents are notified.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import F

from leaseboard.core.models import Alert
from leaseboard.core.services.alert_bursts import (
    BURST_KINDS,
    BornMembers,
    BurstJoins,
    agents_open_incidents,
    alerts_group_bursts,
    bursts_joined_count,
)

# Kinds whose recurrences for one agent are one incident: the kinds a burst groups, as what
# does not fold per agent is grouped per queue (one list, in alert_bursts).
FOLDING_KINDS = BURST_KINDS


def alerts_fold(ids: list[int], born: BornMembers | None = None) -> list[int]:
    """Fold the alerts just opened (`ids`, in the caller's transaction) into the open
    incident of their agent (`alerts_fold_per_agent`), then group what remains into
    bursts of their queue (leaseboard.core.services.alert_bursts). `born`: the alerts a
    sweep batch opened already folded into an open burst, not in `ids`, counted on their
    incidents between the two steps. Returns the ids to notify about: the alerts left
    incidents of their own, and any burst opened now."""
    rest = alerts_fold_per_agent(ids)
    if born is not None and born.members:
        rest = [*rest, *bursts_joined_count(born)]
    return alerts_group_bursts(rest)


def alerts_fold_written(
    opened: list[int],
    members: dict[int, list[int]],
    plan: BurstJoins | None,
    kinds: tuple[str, ...],
    now_ms: int,
) -> list[int]:
    """`alerts_fold` after a sweep batch's write: `opened`, every alert it opened (of
    `kinds`), of which `members` (incident -> alert ids) were born folded into an open
    burst under `plan` (alert_bursts.burst_joins_plan)."""
    born = {alert_id for ids in members.values() for alert_id in ids}
    return alerts_fold(
        [alert_id for alert_id in opened if alert_id not in born],
        BornMembers(plan, members, kinds, now_ms) if plan is not None and members else None,
    )


def alerts_fold_per_agent(ids: list[int]) -> list[int]:
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
    for alert_id, kind, holder in agents_open_incidents(
        {kind for _, kind, _, _ in fresh}, {holder for _, _, holder, _ in fresh}, now - window
    ).exclude(id__in=ids):
        incidents.setdefault((holder, kind), alert_id)
    folded: dict[int, list[int]] = {}
    for alert_id, kind, holder, _ in fresh:
        target = incidents.setdefault((holder, kind), alert_id)
        if target != alert_id:
            folded.setdefault(target, []).append(alert_id)
    if not folded:
        return ids
    # Incidents in id order: two sweeps folding into the same incidents (one fleet's agents)
    # lock them in one order, never each waiting for the other (a 100,000-agent soak met
    # that deadlock, and the sweep that lost it skipped a round).
    for target, rows in sorted(folded.items()):
        Alert.objects.filter(id__in=rows).update(folded_into_id=target, resolved_at_ms=now)
        Alert.objects.filter(id=target).update(
            occurrences=F("occurrences") + len(rows), last_seen_at_ms=now
        )
    gone = {alert_id for rows in folded.values() for alert_id in rows}
    return [alert_id for alert_id in ids if alert_id not in gone]
