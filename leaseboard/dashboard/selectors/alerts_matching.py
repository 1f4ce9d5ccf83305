"""Acknowledge by query's confirmation page: the alerts the alerts page's filters (kind,
agent, queue, state) select that still need an acknowledgement (open, not acknowledged),
counted up to BULK_MAX + 1, and the first BULK_MAX of them, newest first. 2 queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaseboard.core.models import Alert
from leaseboard.core.services.bulk import BULK_MAX
from leaseboard.dashboard.selectors.alerts import AlertFilters, filtered

QUERY_KEYS = ("kind", "agent", "queue", "state")


# deliberate: declared fields, alike in shape with the other bulk pages' matches only.
@dataclass
class AlertMatching:
    alerts: list[Alert]
    total: int
    query: dict[str, str]

    @property
    def capped(self) -> bool:
        return self.total > BULK_MAX


def alerts_matching(params: Any) -> AlertMatching:
    filters = AlertFilters.from_query(params)
    qs = filtered(filters).filter(acknowledged_at_ms__isnull=True, resolved_at_ms__isnull=True)
    total = qs.order_by().values("id")[: BULK_MAX + 1].count()
    alerts = list(
        qs.select_related("work_item", "lease__holder")
        .defer("work_item__scope", "lease__recent_renewals")
        .order_by("-id")[:BULK_MAX]
    )
    query = {k: v for k, v in filters.query().items() if k in QUERY_KEYS}
    return AlertMatching(alerts, total, query)
