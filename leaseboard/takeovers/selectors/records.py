"""Intervention records for managers: the filters, keyset pages and the CSV export's rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Q, QuerySet

from leaseboard.core.paging import cut_page, pair_cursor
from leaseboard.domain.text import storable_or_replaced
from leaseboard.takeovers.models import Intervention, ReasonCategory
from leaseboard.takeovers.selectors.narrowing import narrowed

PAGE_SIZE = 50


def _day_ms(raw: str, end: bool = False) -> int | None:
    try:
        day = datetime.strptime(raw.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    ms = int(day.timestamp() * 1000)
    return ms + 86_400_000 if end else ms


@dataclass
class InterventionFilters:
    date_from: str = ""
    date_to: str = ""
    requester: str = ""
    approver: str = ""
    agent: str = ""
    queue: str = ""
    reason: str = ""
    outcome: str = ""
    break_glass: str = ""  # "", "yes", "no", "unreviewed"
    cursor: str = ""

    FIELDS = (
        "date_from",
        "date_to",
        "requester",
        "approver",
        "agent",
        "queue",
        "reason",
        "outcome",
        "break_glass",
    )

    @classmethod
    def from_query(cls, q: Any) -> InterventionFilters:
        # storable_or_replaced: a NUL matches nothing instead of failing in PostgreSQL.
        values = {
            name: storable_or_replaced((q.get(name, "") or "").strip()[:150]) for name in cls.FIELDS
        }
        if values["reason"] not in ReasonCategory.values:
            values["reason"] = ""
        if values["outcome"] not in Intervention.Outcome.values:
            values["outcome"] = ""
        if values["break_glass"] not in ("yes", "no", "unreviewed"):
            values["break_glass"] = ""
        return cls(**values, cursor=(q.get("cursor", "") or "")[:60])

    def query(self, **override: str) -> str:
        from urllib.parse import urlencode

        params = {n: getattr(self, n) for n in self.FIELDS if getattr(self, n)}
        params.update({k: v for k, v in override.items() if v})
        return ("?" + urlencode(params)) if params else ""

    def apply(self, qs: QuerySet[Intervention]) -> QuerySet[Intervention]:
        start, end = _day_ms(self.date_from), _day_ms(self.date_to, end=True)
        if start is not None:
            qs = qs.filter(requested_at_ms__gte=start)
        if end is not None:
            qs = qs.filter(requested_at_ms__lt=end)
        qs = narrowed(
            qs,
            requested_by__username=self.requester,
            approved_by__username=self.approver,
            agent__name=self.agent,
            queue__name=self.queue,
            reason_category=self.reason,
            outcome=self.outcome,
        )
        if self.break_glass == "unreviewed":
            # The review queue: break-glass takeovers no manager has reviewed yet.
            qs = qs.filter(break_glass=True, reviewed_at_ms__isnull=True)
        elif self.break_glass:
            qs = qs.filter(break_glass=self.break_glass == "yes")
        return qs


def intervention_base() -> QuerySet[Intervention]:
    """Intervention rows with everything a list, an export or a detail page shows."""
    return Intervention.objects.select_related(
        "work_item",
        "queue",
        "agent",
        "grantee",
        "requested_by",
        "approved_by",
        "reviewed_by",
        "lease",
    )


@dataclass
class InterventionPage:
    rows: list[Intervention]
    filters: InterventionFilters
    next_cursor: str = ""


def interventions_list(filters: InterventionFilters, size: int = PAGE_SIZE) -> InterventionPage:
    """Keyset pages on (requested_at_ms, id) descending: no OFFSET, no COUNT(*)."""
    qs = filters.apply(intervention_base())
    cursor = pair_cursor(filters.cursor, int, sep=":") if filters.cursor else None
    if cursor:
        ms, pk = cursor
        qs = qs.filter(Q(requested_at_ms__lt=ms) | Q(requested_at_ms=ms, id__lt=pk))
    rows, nxt = cut_page(
        list(qs.order_by("-requested_at_ms", "-id")[: size + 1]),
        size,
        lambda iv: f"{iv.requested_at_ms}:{iv.id}",
    )
    return InterventionPage(rows=rows, filters=filters, next_cursor=nxt)


REVIEW_CAP = 999


def unreviewed_break_glass_count() -> int:
    """Break-glass takeovers no manager has reviewed, counted up to REVIEW_CAP+1."""
    return (
        Intervention.objects.filter(break_glass=True, reviewed_at_ms__isnull=True)
        .order_by()
        .values("id")[: REVIEW_CAP + 1]
        .count()
    )


def interventions_for_export(filters: InterventionFilters, chunk: int = 1000):
    """Every matching intervention, newest first, streamed in keyset chunks."""
    cursor: tuple[int, int] | None = None
    while True:
        qs = filters.apply(intervention_base())
        if cursor:
            qs = qs.filter(
                Q(requested_at_ms__lt=cursor[0]) | Q(requested_at_ms=cursor[0], id__lt=cursor[1])
            )
        rows = list(qs.order_by("-requested_at_ms", "-id")[:chunk])
        yield from rows
        if len(rows) < chunk:
            return
        cursor = (rows[-1].requested_at_ms, rows[-1].id)
