"""Takeover reads: approver queues, the operator's standing, intervention records with
filters, keyset pages, timeline, CSV rows and the manager's summary. Fixed query counts;
nothing here writes."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Min, Q, QuerySet

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Checkpoint, Effect, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.takeovers.models import Intervention, ReasonCategory, TakeoverRequest

PAGE_SIZE = 50


def pending_count() -> int:
    return TakeoverRequest.objects.filter(status=TakeoverRequest.Status.PENDING).count()


def pending_requests(limit: int = 200) -> list[TakeoverRequest]:
    return list(
        TakeoverRequest.objects.filter(status=TakeoverRequest.Status.PENDING)
        .select_related("work_item", "requested_by", "grantee", "target_holder")
        .order_by("decide_by_ms", "id")[:limit]
    )


def pending_effects(limit: int = 200) -> list[Effect]:
    return list(
        Effect.objects.filter(decision=Effect.Decision.PENDING_APPROVAL)
        .select_related("work_item", "executor", "lease")
        .order_by("proposed_at_ms")[:limit]
    )


@dataclass
class Standing:
    intervention: Intervention
    lease: Lease
    expires_in_ms: int
    max_in_ms: int
    live: bool
    unreconciled: list[Effect]
    effects: list[Effect]
    checkpoint: Checkpoint | None


def my_standing(user: Any) -> list[Standing]:
    """Every open intervention whose standing was granted to `user`."""
    now = db_now_ms()
    ivs = list(
        Intervention.objects.filter(grantee__user=user, outcome=Intervention.Outcome.OPEN)
        .select_related("lease", "work_item", "work_item__queue", "agent", "grantee")
        .order_by("-decided_at_ms")[:20]
    )
    item_ids = [iv.work_item_id for iv in ivs]
    effects: dict[int, list[Effect]] = {i: [] for i in item_ids}
    for e in (
        Effect.objects.filter(work_item_id__in=item_ids)
        .select_related("executor")
        .order_by("-proposed_at_ms")[:500]
    ):
        effects[e.work_item_id].append(e)
    checkpoints: dict[int, Checkpoint] = {}
    for cp in Checkpoint.objects.filter(work_item_id__in=item_ids).order_by("work_item_id", "-seq"):
        checkpoints.setdefault(cp.work_item_id, cp)
    out = []
    for iv in ivs:
        lease = iv.lease
        live = lease.state in LIVE_STATES and lease.expires_at_ms > now
        mine = effects[iv.work_item_id]
        out.append(
            Standing(
                intervention=iv,
                lease=lease,
                expires_in_ms=max(0, lease.expires_at_ms - now),
                max_in_ms=max(0, lease.max_expires_at_ms - now),
                live=live,
                unreconciled=[e for e in mine if e.needs_reconciliation],
                effects=mine[:50],
                checkpoint=checkpoints.get(iv.work_item_id),
            )
        )
    return out


# --- intervention records -------------------------------------------------------------------


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
    break_glass: str = ""  # "", "yes", "no"
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
        values = {name: (q.get(name, "") or "").strip()[:150] for name in cls.FIELDS}
        if values["reason"] not in ReasonCategory.values:
            values["reason"] = ""
        if values["outcome"] not in Intervention.Outcome.values:
            values["outcome"] = ""
        if values["break_glass"] not in ("yes", "no"):
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
        if self.requester:
            qs = qs.filter(requested_by__username=self.requester)
        if self.approver:
            qs = qs.filter(approved_by__username=self.approver)
        if self.agent:
            qs = qs.filter(agent__name=self.agent)
        if self.queue:
            qs = qs.filter(queue__name=self.queue)
        if self.reason:
            qs = qs.filter(reason_category=self.reason)
        if self.outcome:
            qs = qs.filter(outcome=self.outcome)
        if self.break_glass:
            qs = qs.filter(break_glass=self.break_glass == "yes")
        return qs


def _base() -> QuerySet[Intervention]:
    return Intervention.objects.select_related(
        "work_item", "queue", "agent", "grantee", "requested_by", "approved_by", "lease"
    )


@dataclass
class InterventionPage:
    rows: list[Intervention]
    filters: InterventionFilters
    next_cursor: str = ""


def interventions_list(filters: InterventionFilters, size: int = PAGE_SIZE) -> InterventionPage:
    """Keyset pages on (requested_at_ms, id) descending: no OFFSET, no COUNT(*)."""
    qs = filters.apply(_base())
    if filters.cursor:
        try:
            ms, pk = (int(x) for x in filters.cursor.split(":", 1))
            qs = qs.filter(Q(requested_at_ms__lt=ms) | Q(requested_at_ms=ms, id__lt=pk))
        except ValueError:
            pass
    rows = list(qs.order_by("-requested_at_ms", "-id")[: size + 1])
    nxt = ""
    if len(rows) > size:
        rows = rows[:size]
        nxt = f"{rows[-1].requested_at_ms}:{rows[-1].id}"
    return InterventionPage(rows=rows, filters=filters, next_cursor=nxt)


def interventions_for_export(filters: InterventionFilters, chunk: int = 1000):
    """Every matching intervention, newest first, streamed in keyset chunks."""
    cursor: tuple[int, int] | None = None
    while True:
        qs = filters.apply(_base())
        if cursor:
            qs = qs.filter(
                Q(requested_at_ms__lt=cursor[0]) | Q(requested_at_ms=cursor[0], id__lt=cursor[1])
            )
        rows = list(qs.order_by("-requested_at_ms", "-id")[:chunk])
        yield from rows
        if len(rows) < chunk:
            return
        cursor = (rows[-1].requested_at_ms, rows[-1].id)


@dataclass
class TimelineEntry:
    at_ms: int
    kind: str
    actor: str
    text: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class InterventionDetail:
    intervention: Intervention
    timeline: list[TimelineEntry]
    effects: list[Effect]
    first_refused_ms: int | None

    @property
    def request_to_decision_ms(self) -> int:
        return self.intervention.decided_at_ms - self.intervention.requested_at_ms


def _effect_entries(e: Effect, iv: Intervention) -> list[TimelineEntry]:
    who = e.executor.name if e.executor else "?"
    out = []
    if e.source == Effect.Source.HUMAN and e.lease_id == iv.lease_id:
        pass  # recorded by the human: the intervention event says so
    elif e.decision == Effect.Decision.REFUSED:
        out.append(
            TimelineEntry(
                e.proposed_at_ms,
                "effect_refused",
                who,
                f"{e.kind} on {e.target} at epoch {e.epoch} refused: {e.refusal_code}",
                {"effect_id": str(e.id), "current_epoch": e.current_epoch},
            )
        )
    elif e.proposed_at_ms >= iv.requested_at_ms:
        out.append(
            TimelineEntry(
                e.proposed_at_ms,
                "effect_" + e.decision,
                who,
                f"{e.kind} on {e.target} at epoch {e.epoch}: {e.decision}",
                {"effect_id": str(e.id)},
            )
        )
    if (
        e.outcome_at_ms
        and e.outcome_at_ms >= iv.requested_at_ms
        and e.source != Effect.Source.HUMAN
    ):
        out.append(
            TimelineEntry(
                e.outcome_at_ms, "effect_outcome", who, f"{e.kind} on {e.target}: {e.outcome}"
            )
        )
    if e.resolved_at_ms:
        out.append(
            TimelineEntry(
                e.resolved_at_ms,
                "effect_reconciled",
                e.resolved_by.name if e.resolved_by else "?",
                f"{e.kind} on {e.target} (epoch {e.epoch}) reconciled as {e.resolution}: "
                f"{e.resolution_note}",
                {"effect_id": str(e.id)},
            )
        )
    return out


def intervention_detail(pk: int) -> InterventionDetail | None:
    iv = (
        _base()
        .select_related("reviewed_by", "successor_lease__holder", "request", "revoked_lease")
        .filter(id=pk)
        .first()
    )
    if iv is None:
        return None
    timeline = [
        TimelineEntry(ev.at_ms, ev.kind, ev.actor_name, _event_text(ev.kind, ev.detail), ev.detail)
        for ev in iv.events.order_by("at_ms", "id")
    ]
    effects = list(
        Effect.objects.filter(work_item_id=iv.work_item_id)
        .filter(
            Q(proposed_at_ms__gte=iv.requested_at_ms)
            | Q(resolved_at_ms__gte=iv.requested_at_ms)
            | Q(outcome_at_ms__gte=iv.requested_at_ms)
        )
        .select_related("executor", "resolved_by")
        .order_by("proposed_at_ms")[:500]
    )
    for e in effects:
        timeline.extend(_effect_entries(e, iv))
    timeline.sort(key=lambda t: t.at_ms)
    first_refused = None
    if iv.revoked_lease_id:
        first_refused = Effect.objects.filter(
            lease_id=iv.revoked_lease_id,
            decision=Effect.Decision.REFUSED,
            proposed_at_ms__gte=iv.decided_at_ms,
        ).aggregate(first=Min("proposed_at_ms"))["first"]
    return InterventionDetail(iv, timeline, effects, first_refused)


def _event_text(kind: str, d: dict[str, Any]) -> str:
    texts = {
        "requested": lambda: (
            f"requested for {d.get('grantee')}: {d.get('reason_category')}: {d.get('reason')}"
        ),
        "approved": lambda: "approved" + (f": {d['note']}" if d.get("note") else ""),
        "break_glass": lambda: "break-glass takeover (no approver; flagged for review)",
        "revoked": lambda: f"revoked {d.get('holder')}'s lease at epoch {d.get('epoch')}",
        "granted": lambda: f"granted {d.get('holder')} standing at epoch {d.get('epoch')}",
        "alerts_resolved": lambda: f"resolved {d.get('count')} open alert(s)",
        "extended": lambda: f"extended standing: {d.get('reason')}",
        "effect_recorded": lambda: (
            f"recorded {d.get('effect_kind')} on {d.get('target')} at epoch {d.get('epoch')}: "
            f"{d.get('outcome')}"
        ),
        "completed": lambda: "completed the work" + (f": {d['note']}" if d.get("note") else ""),
        "handed_back": lambda: (
            "handed back to the agent pool" + (f": {d['note']}" if d.get("note") else "")
        ),
        "assigned": lambda: f"assigned to {d.get('agent')} at epoch {d.get('epoch')}",
        "lapsed": lambda: "standing lapsed",
        "reviewed": lambda: f"reviewed: {d.get('note')}",
    }
    fn = texts.get(kind)
    return fn() if fn else kind


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
