"""Bursts: many agents' alerts of one kind in one queue at once (a region fails, half the
fleet stops renewing in the same second) are one incident of the queue, not one row each.

`alerts_group_bursts` runs after the per-agent fold (leaseboard.core.services.alert_folding)
in the transaction that opened the alerts. Per (queue, kind), the alerts it is given join
the queue's open burst incident of that kind when one was seen within
LEASEBOARD_ALERT_BURST_WINDOW_MS; else, once they and the open alerts of that (queue, kind)
opened within the window number LEASEBOARD_ALERT_BURST_MIN or more, they all become a new
burst incident: "5,000 leases expired in queue payments within 2.0 s", with the count
(`occurrences`), first and last seen, and the queue (`Alert.queue`, set only on a burst
incident). Each member keeps its own row and facts (lease, epoch, message), is resolved at
once and points at the incident (`folded_into`): the drill-down list. Only a new incident
is notified: the webhook and e-mail see one delivery per burst, not one per lease.

A burst of jeopardy resolves itself once none of its leases is still in jeopardy (each
expired, or renewed back): `alert_groups_settle`, a sweep step.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Lease, Queue

# The kinds about one agent's lease, which fold per agent (FOLDING_KINDS, alert_folding) and
# group per queue. Not recipient refusals (counted per incident already), outage summaries or
# expired takeover requests (about no agent's lease).
BURST_KINDS = (
    Alert.Kind.JEOPARDY.value,
    Alert.Kind.EXPIRED.value,
    Alert.Kind.STANDING_LAPSED.value,
    Alert.Kind.STALE_EFFECT.value,
    Alert.Kind.NEEDS_RECONCILIATION.value,
)
# What happened to each member, for the incident's message.
_WHAT = {
    Alert.Kind.JEOPARDY.value: "leases missed their renewals (jeopardy)",
    Alert.Kind.EXPIRED.value: "leases expired",
    Alert.Kind.STANDING_LAPSED.value: "human standings lapsed",
    Alert.Kind.STALE_EFFECT.value: "stale effects were refused",
    Alert.Kind.NEEDS_RECONCILIATION.value: "work items need reconciliation",
}
SETTLE_MAX = 50  # open jeopardy bursts looked at per sweep


def burst_min() -> int:
    return int(settings.LEASEBOARD_ALERT_BURST_MIN)


def burst_window_ms() -> int:
    return int(settings.LEASEBOARD_ALERT_BURST_WINDOW_MS)


def burst_message(kind: str, queue: str, count: int, first_ms: int, last_ms: int) -> str:
    span = max(0, last_ms - first_ms) / 1000
    return f"{count:,} {_WHAT.get(kind, kind)} in queue {queue} within {span:.1f} s"[:500]


def alerts_group_bursts(ids: list[int]) -> list[int]:
    """Group the alerts just opened (`ids`, in the caller's transaction, already folded
    per agent) into burst incidents of their queue (see the module docstring). Returns the
    ids to notify about: those left incidents of their own, and each burst incident opened
    now. A few queries per (queue, kind) present, whatever the number of alerts."""
    minimum, window = burst_min(), burst_window_ms()
    if not ids or not window or minimum < 2:
        return ids
    groups: dict[tuple[int, str], list[tuple[int, int, int]]] = defaultdict(list)
    for alert_id, kind, queue_id, at, n in (
        # deliberate: the filter's lookups one a line, as _earlier's below; each asks its own rows.
        Alert.objects.filter(
            id__in=ids,
            kind__in=BURST_KINDS,
            folded_into__isnull=True,
            lease__isnull=False,
            work_item__isnull=False,
        )
        .order_by("id")
        .values_list("id", "kind", "work_item__queue_id", "opened_at_ms", "occurrences")
    ):
        groups[(queue_id, kind)].append((alert_id, at, n))
    if not groups:
        return ids
    _lock(sorted(groups))
    gone: set[int] = set()
    opened: list[int] = []
    for (queue_id, kind), members in sorted(groups.items()):
        now = max(at for _, at, _ in members)
        incident = _open_burst(queue_id, kind, now - window)
        if incident is None:
            members = _earlier(queue_id, kind, now - window, exclude=ids) + members
            if len(members) < minimum:
                continue
            incident = _burst_create(queue_id, kind, members)
            opened.append(incident)
        _join(incident, members, now)
        gone.update(alert_id for alert_id, _, _ in members)
    return [alert_id for alert_id in ids if alert_id not in gone] + opened


def _lock(keys: list[tuple[int, str]]) -> None:
    """One writer per (queue, kind) decides whether a burst is open (PostgreSQL: a
    transaction-scoped advisory lock, in a fixed order; SQLite serializes writers)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for queue_id, kind in keys:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [queue_id, kind])


def _open_burst(queue_id: int, kind: str, since_ms: int) -> int | None:
    return (
        Alert.objects.filter(queue_id=queue_id, kind=kind, resolved_at_ms__isnull=True)
        .annotate(seen=Coalesce("last_seen_at_ms", "opened_at_ms"))
        .filter(seen__gte=since_ms)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def _earlier(
    queue_id: int, kind: str, since_ms: int, *, exclude: list[int]
) -> list[tuple[int, int, int]]:
    """The open alerts of (queue, kind) opened within the window before these: the start
    of the burst, notified one by one before it was one."""
    return list(
        # deliberate: lookups one a line, as in alerts_group_bursts; its own rows.
        Alert.objects.filter(
            resolved_at_ms__isnull=True,
            folded_into__isnull=True,
            queue__isnull=True,
            lease__isnull=False,
            kind=kind,
            work_item__queue_id=queue_id,
            opened_at_ms__gte=since_ms,
        )
        .exclude(id__in=exclude)
        .order_by("id")
        .values_list("id", "opened_at_ms", "occurrences")[:10_000]
    )


def _burst_create(queue_id: int, kind: str, members: list[tuple[int, int, int]]) -> int:
    first_id = min(alert_id for alert_id, _, _ in members)
    first_ms = min(at for _, at, _ in members)
    due = Alert.objects.filter(id__in=[m[0] for m in members]).order_by("due_at_ms")
    queue = Queue.objects.filter(id=queue_id).values_list("name", flat=True).first() or "?"
    alert = Alert.objects.create(
        kind=kind,
        dedupe_key=f"burst:{kind}:{queue_id}:{first_id}",
        queue_id=queue_id,
        message=burst_message(kind, queue, 0, first_ms, first_ms),
        detail={"burst": True, "queue": queue},
        occurrences=0,
        due_at_ms=due.values_list("due_at_ms", flat=True).first(),
        opened_at_ms=first_ms,
        last_seen_at_ms=first_ms,
    )
    return alert.id


def _join(incident: int, members: list[tuple[int, int, int]], now: int) -> None:
    """Fold `members` into the burst incident: each resolved, pointing at it; the incident
    counts them and says when it was last seen."""
    Alert.objects.filter(id__in=[m[0] for m in members]).update(
        folded_into_id=incident, resolved_at_ms=now
    )
    added = sum(n for _, _, n in members)
    Alert.objects.filter(id=incident).update(
        occurrences=F("occurrences") + added, last_seen_at_ms=now
    )
    row: Any = (
        Alert.objects.filter(id=incident)
        .values("kind", "queue__name", "occurrences", "opened_at_ms", "last_seen_at_ms")
        .get()
    )
    Alert.objects.filter(id=incident).update(
        message=burst_message(
            row["kind"],
            row["queue__name"],
            row["occurrences"],
            row["opened_at_ms"],
            row["last_seen_at_ms"],
        )
    )


def alert_groups_settle(limit: int = SETTLE_MAX) -> int:
    """Resolve the open jeopardy bursts none of whose leases is still in jeopardy (each
    expired, was released, or renewed back). Returns how many were resolved."""
    bursts = list(
        Alert.objects.filter(
            queue__isnull=False,
            kind=Alert.Kind.JEOPARDY.value,
            resolved_at_ms__isnull=True,
        )
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
    settled = [
        burst
        for burst in bursts
        if not Alert.objects.filter(
            Q(lease__state=Lease.State.JEOPARDY) & Q(lease__epoch=F("epoch")),
            folded_into_id=burst,
        ).exists()
    ]
    if settled:
        Alert.objects.filter(id__in=settled).update(resolved_at_ms=db_now_ms())
    return len(settled)
