"""The work item page: its leases newest epoch first, the chosen lease's renewal history
and chart, effects, checkpoints, alerts and audit entries, each list bounded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaseboard.core.clock import db_now_ms
from leaseboard.core.display_hints import amount_fields_annotated, display_hints_loaded
from leaseboard.core.models import Alert, AuditEntry, Checkpoint, Effect, Lease, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.leases import next_grant_at
from leaseboard.dashboard.selectors.audit import AuditRow, name_objects
from leaseboard.dashboard.selectors.charts import GapPoint, gap_chart
from leaseboard.dashboard.selectors.rows import LeaseRow, lease_row
from leaseboard.domain.amounts import amount_shown
from leaseboard.domain.text import storable

TIMELINE_LIMIT = 50
EFFECT_LIMIT = 100
CHECKPOINT_LIMIT = 10
ALERT_LIMIT = 50
AUDIT_LIMIT = 50


@dataclass
class RenewalHistory:
    lease: Lease
    times: list[int]
    gaps: list[GapPoint]
    threshold_ms: int  # jeopardy_after_ms: a gap at or past this means jeopardy
    ttl_ms: int
    chart: dict[str, Any]


@dataclass
class WorkItemPage:
    item: WorkItem
    now_ms: int
    leases: list[LeaseRow]
    live: LeaseRow | None
    renewals: RenewalHistory | None
    effects: list[Effect]
    checkpoints: list[Checkpoint]
    alerts: list[Alert]
    audit: list[AuditRow]
    # The fence the latest lease sets (docs/design.md §5): until then no acquire, and no effect
    # under a grant made through it. 0 when there is none now.
    fenced_until_ms: int = 0

    @property
    def fenced_in_ms(self) -> int:
        return max(0, self.fenced_until_ms - self.now_ms)


def renewal_history(lease: Lease) -> RenewalHistory:
    """Recent renewals from the lease row's bounded window, with the gap before each
    (the first measured from the grant) and an SVG-ready chart against the threshold."""
    times = lease.recent_renewal_times()
    gaps: list[GapPoint] = []
    prev: int | None = None
    if lease.renew_count <= len(times):
        prev = lease.granted_at_ms  # the window still holds every renewal since the grant
    for t in times:
        if prev is not None:
            gaps.append(GapPoint(t, t - prev))
        prev = t
    return RenewalHistory(
        lease=lease,
        times=times,
        gaps=gaps,
        threshold_ms=lease.jeopardy_after_ms,
        ttl_ms=lease.ttl_ms,
        chart=gap_chart(gaps, lease.jeopardy_after_ms, lease.ttl_ms),
    )


def _effects(item: WorkItem) -> list[Effect]:
    """The item's newest effects, each with `amount` (its kind's display hint applied to
    the payload fields it names, read in the same query; the payload itself is deferred)."""
    hints = display_hints_loaded()
    effects = list(
        amount_fields_annotated(
            Effect.objects.select_related("executor", "lease")
            .defer("payload", "fencing_token", "lease__recent_renewals")
            .filter(work_item=item),
            hints,
        ).order_by("-proposed_at_ms", "-id")[:EFFECT_LIMIT]
    )
    for e in effects:
        e.amount = amount_shown(e.kind, getattr(e, "display_payload", None), hints)  # type: ignore[attr-defined]
    return effects


def work_item_page(*, key: str, lease_id: str = "") -> WorkItemPage | None:
    """Everything about one work item in 7 queries, each list bounded."""
    if not storable(key):
        return None  # no stored key holds a NUL; PostgreSQL would refuse the lookup
    item = (
        WorkItem.objects.select_related("queue", "held_by", "admitted_by").filter(key=key).first()
    )
    if item is None:
        return None
    now_ms = db_now_ms()
    leases = list(
        Lease.objects.select_related("holder", "ended_by", "held_by")
        .filter(work_item=item)
        .order_by("-epoch")[:TIMELINE_LIMIT]
    )
    rows = [lease_row(lease, now_ms) for lease in leases]
    live = next((r for r in rows if r.lease.state in LIVE_STATES), None)
    chosen = next((r.lease for r in rows if str(r.lease.id) == lease_id), None)
    if chosen is None and rows:
        chosen = rows[0].lease
    effects = _effects(item)
    checkpoints = list(
        Checkpoint.objects.filter(work_item=item).order_by("-seq")[:CHECKPOINT_LIMIT]
    )
    alerts = list(
        Alert.objects.select_related("acknowledged_by")
        .filter(work_item=item)
        .order_by("-opened_at_ms", "-id")[:ALERT_LIMIT]
    )
    audit = name_objects(
        list(
            AuditEntry.objects.select_related("work_item")
            .defer("work_item__scope")
            .filter(work_item=item)
            .order_by("-seq")[:AUDIT_LIMIT]
        )
    )
    return WorkItemPage(
        item=item,
        now_ms=now_ms,
        leases=rows,
        live=live,
        renewals=renewal_history(chosen) if chosen else None,
        effects=effects,
        checkpoints=checkpoints,
        alerts=alerts,
        audit=audit,
        # From the effects already read (the newest ones): no query of its own.
        fenced_until_ms=next_grant_at(
            leases[0],
            open_tokens=any(e.lease_id == leases[0].id and e.needs_reconciliation for e in effects),
        )
        if leases
        else 0,
    )
