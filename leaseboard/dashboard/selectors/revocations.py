"""The bulk revoke's confirmation page: the live leases of the work items picked on the
live page, or of every lease its filters match ("select all N matching"), as they are
now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.dashboard.selectors.live import LiveFilters, leases_filtered
from leaseboard.dashboard.selectors.rows import LeaseRow, lease_row
from leaseboard.domain.text import storable_or_replaced

PICK_LIMIT = 200


def leases_to_revoke(*, keys: list[str]) -> list[LeaseRow]:
    """The live leases of these work keys, in the order picked; 2 queries."""
    picked = (storable_or_replaced(k.strip()) for k in keys if k and k.strip())
    wanted = list(dict.fromkeys(picked))[:PICK_LIMIT]
    if not wanted:
        return []
    now_ms = db_now_ms()
    leases = {
        lease.work_item.key: lease
        for lease in Lease.objects.select_related("work_item", "holder")
        .defer("work_item__scope", "recent_renewals")
        .filter(work_item__key__in=wanted, state__in=LIVE_STATES)
    }
    return [lease_row(leases[k], now_ms) for k in wanted if k in leases]


@dataclass
class Matching:
    """Agents' live leases that the live page's filters match: how many (counted up to
    PICK_LIMIT + 1) and the first PICK_LIMIT of them, by work key."""

    # deliberate: declared fields, alike in shape with the other bulk pages' matches only.
    rows: list[LeaseRow]
    total: int
    query: dict[str, str]

    @property
    def capped(self) -> bool:
        return self.total > PICK_LIMIT


def leases_matching(params: Any, *, unheld: bool = False) -> Matching:
    """The live agent leases the live page's filters (queue, holder, work-key search,
    certainty) select; people's standing is never revoked (or held) in bulk. `unheld`: only
    work not on hold already (hold by query). 3 queries."""
    filters = LiveFilters.from_query(params)
    now_ms = db_now_ms()
    qs = leases_filtered(filters)
    qs = qs.filter(state__in=LIVE_STATES, holder__kind="agent", expires_at_ms__gt=now_ms)
    if unheld:
        qs = qs.filter(work_item__held_at_ms__isnull=True)
    if filters.certainty == "active":
        qs = qs.filter(state=Lease.State.ACTIVE, due_at_ms__gt=now_ms)
    elif filters.certainty == "jeopardy":
        qs = qs.exclude(state=Lease.State.ACTIVE, due_at_ms__gt=now_ms)
    elif filters.certainty in ("expired", "ended"):
        qs = qs.none()
    total = qs.order_by().values("id")[: PICK_LIMIT + 1].count()
    leases = (
        qs.select_related("work_item", "holder")
        .defer("work_item__scope", "recent_renewals")
        .order_by("work_item__key")[:PICK_LIMIT]
    )
    query = {k: v for k, v in filters.query().items() if k in ("certainty", "queue", "holder", "q")}
    return Matching([lease_row(lease, now_ms) for lease in leases], total, query)
