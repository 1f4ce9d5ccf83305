"""Decide by query on the approvals inbox: the effects waiting for approval that a filter
(kind, queue, agent, work-key search) selects and that can still be decided (their lease is
live), counted up to BULK_MAX + 1, and the first BULK_MAX of them, oldest first, each with
the content digest the confirmation page binds the decision to. 2 queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.bulk import BULK_MAX
from leaseboard.domain.text import storable_or_replaced
from leaseboard.takeovers.selectors.approvals import payload_summary
from leaseboard.takeovers.selectors.narrowing import narrowed


@dataclass(frozen=True)
class EffectFilters:
    kind: str = ""
    queue: str = ""
    agent: str = ""
    q: str = ""  # part of the work key

    @classmethod
    def from_query(cls, params: Any) -> EffectFilters:
        def text(name: str, limit: int) -> str:
            return storable_or_replaced(str(params.get(name, "")).strip()[:limit])

        return cls(text("kind", 200), text("queue", 100), text("agent", 150), text("q", 200))

    def query(self) -> dict[str, str]:
        values = {"kind": self.kind, "queue": self.queue, "agent": self.agent, "q": self.q}
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True)
class Waiting:
    effect: Effect
    summary: list[tuple[str, str]]  # the payload fields that say what it does


@dataclass
class EffectMatching:
    rows: list[Waiting]
    total: int
    filters: EffectFilters

    @property
    def capped(self) -> bool:
        return self.total > BULK_MAX

    @property
    def query(self) -> dict[str, str]:
        return self.filters.query()


def _waiting(filters: EffectFilters, now_ms: int) -> QuerySet[Effect]:
    qs = Effect.objects.filter(
        decision=Effect.Decision.PENDING_APPROVAL,
        lease__state__in=LIVE_STATES,
        lease__expires_at_ms__gt=now_ms,
    )
    # deliberate: each filter's lookup one a line (narrowed skips blank ones).
    return narrowed(
        qs,
        kind=filters.kind,
        work_item__queue__name=filters.queue,
        executor__name=filters.agent,
        work_item__key__contains=filters.q,
    )


def effects_matching(params: Any) -> EffectMatching:
    filters = EffectFilters.from_query(params)
    qs = _waiting(filters, db_now_ms())
    total = qs.order_by().values("id")[: BULK_MAX + 1].count()
    effects = list(
        qs.select_related("work_item", "executor")
        .defer("fencing_token", "work_item__scope")
        .order_by("proposed_at_ms", "id")[:BULK_MAX]
    )
    rows = [Waiting(e, payload_summary(e.payload)) for e in effects]
    return EffectMatching(rows, total, filters)
