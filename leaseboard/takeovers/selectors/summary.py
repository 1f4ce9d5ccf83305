"""The manager's summary: counts by reason and agent, median times, unreviewed break-glass
takeovers, over the filtered intervention records."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from django.db.models import Min

from leaseboard.core.models import Effect
from leaseboard.takeovers.models import Intervention
from leaseboard.takeovers.selectors.records import InterventionFilters


def _median(values: list[int]) -> int | None:
    return int(statistics.median(values)) if values else None


@dataclass
class Summary:
    total: int
    by_reason: list[tuple[str, int]]
    by_agent: list[tuple[str, int]]
    median_request_to_decision_ms: int | None
    median_decision_to_first_refusal_ms: int | None
    break_glass_unreviewed: int


def summary(filters: InterventionFilters, limit: int = 10_000) -> Summary:
    """Counts and medians over the filtered records (bounded; narrow the dates for more)."""
    rows = list(
        filters.apply(Intervention.objects.all())
        .order_by("-requested_at_ms")
        .values(
            "reason_category",
            "agent__name",
            "requested_at_ms",
            "decided_at_ms",
            "revoked_lease_id",
            "request__target_lease_id",
            "break_glass",
            "reviewed_at_ms",
        )[:limit]
    )
    by_reason: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    for r in rows:
        # The agent's lease: revoked by the takeover, or expired while the request waited.
        r["agent_lease"] = r["revoked_lease_id"] or r["request__target_lease_id"]
        by_reason[r["reason_category"]] = by_reason.get(r["reason_category"], 0) + 1
        agent = r["agent__name"] or "(no live lease)"
        by_agent[agent] = by_agent.get(agent, 0) + 1
    firsts = dict(
        Effect.objects.filter(
            lease_id__in=[r["agent_lease"] for r in rows if r["agent_lease"]],
            decision=Effect.Decision.REFUSED,
        )
        .values("lease_id")
        .annotate(first=Min("proposed_at_ms"))
        .values_list("lease_id", "first")
    )
    to_refusal = [
        firsts[r["agent_lease"]] - r["decided_at_ms"]
        for r in rows
        if r["agent_lease"] in firsts and firsts[r["agent_lease"]] >= r["decided_at_ms"]
    ]
    return Summary(
        total=len(rows),
        by_reason=sorted(by_reason.items(), key=lambda kv: -kv[1]),
        by_agent=sorted(by_agent.items(), key=lambda kv: -kv[1]),
        median_request_to_decision_ms=_median(
            [r["decided_at_ms"] - r["requested_at_ms"] for r in rows]
        ),
        median_decision_to_first_refusal_ms=_median(to_refusal),
        break_glass_unreviewed=sum(1 for r in rows if r["break_glass"] and not r["reviewed_at_ms"]),
    )
