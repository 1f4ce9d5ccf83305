"""The bulk revoke's confirmation page: the live leases of the work items picked on the
live page, as they are now."""

from __future__ import annotations

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.core.models.leases import LIVE_STATES
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
