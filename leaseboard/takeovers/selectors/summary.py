"""The manager's summary: counts by reason and agent, median times, break-glass takeovers
waiting for review, over the filtered intervention records; and the pictures' numbers
(interventions by reason and by agent over a time range, decision times).

Break-glass takeovers had no approver: they stay out of the decision medians and the
decision-time picture, and are counted on their own."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from django.db.models import Min

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect
from leaseboard.takeovers.models import Intervention
from leaseboard.takeovers.selectors.records import InterventionFilters

MINUTE = 60_000
DAY = 1440 * MINUTE
# Range -> (span, bucket).
RANGES = {
    "24h": (DAY, 60 * MINUTE),
    "7d": (7 * DAY, 6 * 60 * MINUTE),
    "30d": (30 * DAY, DAY),
    "90d": (90 * DAY, 3 * DAY),
}
RANGE_LABELS = [("24h", "24 hours"), ("7d", "7 days"), ("30d", "30 days"), ("90d", "90 days")]
DECISION_BUCKETS = (
    ("under 1 min", MINUTE),
    ("1–5 min", 5 * MINUTE),
    ("5–15 min", 15 * MINUTE),
    ("15–60 min", 60 * MINUTE),
    ("over 1 h", None),
)
TOP_AGENTS = 8


def _median(values: list[int]) -> int | None:
    return int(statistics.median(values)) if values else None


@dataclass
class Summary:
    total: int
    by_reason: list[tuple[str, int]]
    by_agent: list[tuple[str, int]]
    median_request_to_decision_ms: int | None  # approved takeovers only (not break-glass)
    median_decision_to_first_refusal_ms: int | None
    break_glass: int
    break_glass_unreviewed: int


@dataclass
class Pictures:
    range: str
    now_ms: int
    starts: list[int]
    reasons: list[str]
    by_reason: dict[str, list[int]]  # reason -> count per bucket
    agents: list[tuple[str, int]]  # the top agents in the range
    decision_times: list[tuple[str, int]]  # approved takeovers by time to decision


def summary(filters: InterventionFilters, limit: int = 10_000) -> Summary:
    """Counts and medians over the filtered records (bounded; narrow the dates for more)."""
    # Plain dicts: each row gains its agent lease below.
    rows: list[dict[str, Any]] = [
        {**row}
        for row in (
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
    ]
    by_reason: dict[str, int] = {}
    by_agent: dict[str, int] = {}
    for r in rows:
        # The agent's lease: revoked by the takeover, or expired while the request waited.
        r["agent_lease"] = r["revoked_lease_id"] or r["request__target_lease_id"]
        by_reason[r["reason_category"]] = by_reason.get(r["reason_category"], 0) + 1
        agent = r["agent__name"] or "(no agent)"
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
    approved = [r for r in rows if not r["break_glass"]]
    return Summary(
        total=len(rows),
        by_reason=sorted(by_reason.items(), key=lambda kv: -kv[1]),
        by_agent=sorted(by_agent.items(), key=lambda kv: -kv[1]),
        median_request_to_decision_ms=_median(
            [r["decided_at_ms"] - r["requested_at_ms"] for r in approved]
        ),
        median_decision_to_first_refusal_ms=_median(to_refusal),
        break_glass=sum(1 for r in rows if r["break_glass"]),
        break_glass_unreviewed=sum(1 for r in rows if r["break_glass"] and not r["reviewed_at_ms"]),
    )


def pictures(filters: InterventionFilters, range_key: str, limit: int = 20_000) -> Pictures:
    """The numbers behind the summary's charts over the chosen range (one query)."""
    range_key = range_key if range_key in RANGES else "30d"
    span, step = RANGES[range_key]
    now = db_now_ms()
    start = now - span
    n = span // step
    rows = list(
        filters.apply(Intervention.objects.filter(requested_at_ms__gte=start))
        .order_by()
        .values_list(
            "requested_at_ms", "decided_at_ms", "reason_category", "agent__name", "break_glass"
        )[:limit]
    )
    reasons = sorted({r[2] for r in rows})
    by_reason = {reason: [0] * n for reason in reasons}
    agents: dict[str, int] = {}
    times = [0] * len(DECISION_BUCKETS)
    for requested, decided, reason, agent, break_glass in rows:
        by_reason[reason][min(int((requested - start) // step), n - 1)] += 1
        agents[agent or "(no agent)"] = agents.get(agent or "(no agent)", 0) + 1
        if break_glass:
            continue
        took = decided - requested
        for i, (_, upper) in enumerate(DECISION_BUCKETS):
            if upper is None or took < upper:
                times[i] += 1
                break
    return Pictures(
        range=range_key,
        now_ms=now,
        starts=[start + i * step for i in range(n)],
        reasons=reasons,
        by_reason=by_reason,
        agents=sorted(agents.items(), key=lambda kv: -kv[1])[:TOP_AGENTS],
        decision_times=[(label, times[i]) for i, (label, _) in enumerate(DECISION_BUCKETS)],
    )
