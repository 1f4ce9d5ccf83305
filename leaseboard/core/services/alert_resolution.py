"""The alerts of work left without a known outcome (needs_reconciliation: raised when a
lease ends with effects nobody reported, resolved when the last is reconciled), and
resolving the open alerts of a lease or a work item."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from leaseboard.core.models import Alert, Effect, Lease
from leaseboard.core.services.alert_raise import alerts_open
from leaseboard.domain import reconciliation as rc

# Effects named in a needs_reconciliation alert's detail (the page lists them all).
RECONCILIATION_EFFECTS_NAMED = 5


class EndedLease(NamedTuple):
    """What a needs_reconciliation alert says of the lease that ended: a Lease
    (`ended_lease`), or a row the sweep's expiry returned."""

    id: Any
    work_item_id: int
    epoch: int
    state: str
    ended_at_ms: int | None
    holder_name: str
    holder_kind: str


def ended_lease(lease: Lease | EndedLease) -> EndedLease:
    if isinstance(lease, EndedLease):
        return lease
    return EndedLease(
        lease.id,
        lease.work_item_id,
        lease.epoch,
        lease.state,
        lease.ended_at_ms,
        lease.holder.name,
        lease.holder.kind,
    )


def reconciliation_alerts_open(leases: Sequence[Lease | EndedLease], now_ms: int) -> list[int]:
    """One `needs_reconciliation` alert per work item that these ended leases leave with
    effects of no known outcome and nobody holding it (an expiry, a lapse, a release, an
    operator's revoke; not a takeover, which hands the item to a person at once). Unique per
    (work item, epoch of the lease that ended): raised once per lost holder, resolved when
    the last of its effects is reconciled. One query over effect_unreconciled_idx."""
    by_item = {lease.work_item_id: ended_lease(lease) for lease in leases}
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
                    f"{lease.holder_name} no longer holds the work ({lease.state}) and "
                    f"{len(found)} effect{'s' if len(found) != 1 else ''} have no known "
                    f"outcome: {named}{more}; it is blocked until someone reconciles them"
                )[:500],
                detail={
                    "holder": lease.holder_name,
                    "holder_kind": lease.holder_kind,
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
