"""The audit log page (managers): entries newest first."""

from __future__ import annotations

from dataclasses import dataclass

from leaseboard.core.models import AuditEntry
from leaseboard.core.paging import cut_page, int_cursor


@dataclass
class AuditPage:
    entries: list[AuditEntry]
    next_cursor: str


def audit_log(*, cursor: str = "", size: int = 50) -> AuditPage:
    """The audit log newest first, keyset on the unique `seq`; 1 query."""
    qs = AuditEntry.objects.select_related("work_item").order_by("-seq")
    before = int_cursor(cursor)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    entries, next_cursor = cut_page(list(qs[: size + 1]), size, lambda e: str(e.seq))
    return AuditPage(entries, next_cursor)
