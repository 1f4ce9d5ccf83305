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

While a burst is open, a sweep batch's new alerts that would join it are born members
(`burst_joins_plan`, read before the batch's write; `bursts_joined_count` after it, under
the groups' locks): the same rows as joining after the write, without writing each alert
twice. In an expiry storm that second write was a fifth of a sweep's time (`make storm`,
py-spy on the workers), and every alert the storm opened stayed in the open-alerts index
until a vacuum.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import F, Q, QuerySet

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Lease, Queue, WorkItem

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


@dataclass(frozen=True)
class BurstJoins:
    """A sweep batch's plan (`burst_joins_plan`): the open burst incident each lease's new
    alert is born folded into, and every (queue, kind) the batch's alerts may group in."""

    incident_of: dict[Any, int]  # lease id -> incident
    keys: frozenset[tuple[int, str]]


def _open_since(since_ms: int) -> Q:
    """Seen within the window: last seen then or later, or opened then or later."""
    return Q(last_seen_at_ms__gte=since_ms) | Q(
        last_seen_at_ms__isnull=True, opened_at_ms__gte=since_ms
    )


def agents_open_incidents(
    kinds: Iterable[str], holders: Iterable[int], since_ms: int
) -> QuerySet[Alert, tuple[int, str, int]]:
    """The open incidents of these agents' alerts of these kinds seen since `since_ms`,
    newest first, as (id, kind, holder id): what the per-agent fold folds into
    (alert_folding.alerts_fold_per_agent), and what keeps an alert from being born into a
    burst (`burst_joins_plan`)."""
    return (
        Alert.objects.filter(
            resolved_at_ms__isnull=True,
            folded_into__isnull=True,
            kind__in=set(kinds),
            lease__holder_id__in=set(holders),
        )
        .filter(_open_since(since_ms))
        .order_by("-id")
        .values_list("id", "kind", "lease__holder_id")
    )


def burst_joins_plan(rows: Sequence[tuple[Any, int, int, str]], now_ms: int) -> BurstJoins | None:
    """Before a sweep batch writes its alerts, (lease id, work item id, holder id, alert
    kind) for each: which of them join a burst already open in their queue, as they would
    after the write. A lease's alert does when its (queue, kind) has an open burst seen
    within the window and the per-agent fold would leave it alone (its agent has no open
    incident of that kind within the fold window, and no other alert of that kind in the
    batch). None when no burst is open for any of them: the batch folds after its write, as
    any alerts. Two or three reads: the open bursts (most batches stop here), the rows' queues,
    the agents' open incidents."""
    minimum, window = burst_min(), burst_window_ms()
    kinds = {kind for *_, kind in rows if kind in BURST_KINDS}
    if not kinds or not window or minimum < 2:
        return None
    since = now_ms - window
    bursts: dict[tuple[int, str], int] = {}
    for incident, queue_id, kind in (
        Alert.objects.filter(queue__isnull=False, kind__in=kinds, resolved_at_ms__isnull=True)
        .filter(_open_since(since))
        .order_by("-id")
        .values_list("id", "queue_id", "kind")
    ):
        bursts.setdefault((queue_id, kind), incident)
    if not bursts:
        return None
    queue_of = dict(
        WorkItem.objects.filter(id__in={item for _, item, _, _ in rows}).values_list(
            "id", "queue_id"
        )
    )
    fold_window = settings.LEASEBOARD_ALERT_FOLD_WINDOW_MS
    alone: Counter[tuple[int, str]] = Counter()
    agents_open: set[tuple[int, str]] = set()
    if fold_window:
        # The kinds that fold per agent are these kinds (alert_folding.FOLDING_KINDS).
        alone.update((holder, kind) for _, _, holder, kind in rows if kind in kinds)
        agents_open = {
            (holder, kind)
            for _, kind, holder in agents_open_incidents(
                kinds, {holder for _, _, holder, _ in rows}, now_ms - fold_window
            )
        }
    incident_of: dict[Any, int] = {}
    for lease_id, item, holder, kind in rows:
        burst = bursts.get((queue_of.get(item, -1), kind))
        if burst is not None and alone[(holder, kind)] <= 1 and (holder, kind) not in agents_open:
            incident_of[lease_id] = burst
    if not incident_of:
        return None
    keys = frozenset(
        (queue_of[item], kind) for _, item, _, kind in rows if kind in kinds and item in queue_of
    )
    return BurstJoins(incident_of, keys)


@dataclass(frozen=True)
class BornMembers:
    """After the write: the alerts born members of each burst (`members`, incident -> alert
    ids) under `plan`, of a write whose alerts are of `kinds`, at `now_ms`."""

    plan: BurstJoins
    members: dict[int, list[int]]
    kinds: tuple[str, ...]
    now_ms: int


def bursts_joined_count(born: BornMembers) -> list[int]:
    """Count the alerts born members of each burst on it, under the locks of every (queue,
    kind) of `born.kinds` the batch's alerts may group in (taken here, in the one order
    `alerts_group_bursts` takes its own, so its later locking of some of them waits for
    nothing). A burst closed since the plan read it (a person resolved it, or it settled)
    keeps nothing: its would-be members are unfolded and returned, to group as any new
    alert."""
    plan, now_ms = born.plan, born.now_ms
    chosen = set(born.kinds)
    _lock(sorted(key for key in plan.keys if key[1] in chosen))
    back: list[int] = []
    for incident, members in sorted(born.members.items()):
        if not _count(incident, len(members), now_ms, open_since=now_ms - burst_window_ms()):
            Alert.objects.filter(id__in=members).update(folded_into_id=None, resolved_at_ms=None)
            back += members
    return back


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
        .filter(_open_since(since_ms))
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
    _count(incident, sum(n for _, _, n in members), now)


def _count(incident: int, added: int, now: int, *, open_since: int | None = None) -> bool:
    """The incident counts `added` more members, last seen `now`, and says so in its
    message. With `open_since`: only while it is unresolved and was seen since then
    (checked on the row's latest version, under its lock); False, counting nothing, if not."""
    counted = Alert.objects.filter(id=incident)
    if open_since is not None:
        counted = counted.filter(_open_since(open_since), resolved_at_ms__isnull=True)
    if not counted.update(occurrences=F("occurrences") + added, last_seen_at_ms=now):
        return False
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
    return True


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
