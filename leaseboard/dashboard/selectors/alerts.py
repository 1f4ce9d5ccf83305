"""The alerts page: open alerts (or all) newest first, and one alert's row after an
acknowledgement. The header's badge count lives in `leaseboard.web.pages`."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert
from leaseboard.core.paging import cut_page, pair_cursor


@dataclass
class AlertPage:
    alerts: list[Alert]
    next_cursor: str
    show: str
    now_ms: int


def _with_people() -> QuerySet[Alert]:
    return Alert.objects.select_related("work_item", "lease__holder", "acknowledged_by")


def alerts_list(*, show: str = "open", cursor: str = "", size: int = 50) -> AlertPage:
    """Open alerts newest first (partial index `alert_open_idx`), or all alerts; 2 queries.
    Keyset cursor: "<opened_at_ms>_<alert id>"."""
    now_ms = db_now_ms()
    qs = _with_people().order_by("-opened_at_ms", "-id")
    if show != "all":
        show = "open"
        qs = qs.filter(resolved_at_ms__isnull=True)
    parsed = pair_cursor(cursor, int)
    if parsed:
        at, aid = parsed
        qs = qs.filter(Q(opened_at_ms__lt=at) | Q(opened_at_ms=at, id__lt=aid))
    alerts, next_cursor = cut_page(list(qs[: size + 1]), size, lambda a: f"{a.opened_at_ms}_{a.id}")
    return AlertPage(alerts, next_cursor, show, now_ms)


def alert_for_row(alert_id: int) -> Alert | None:
    return _with_people().filter(id=alert_id).first()
