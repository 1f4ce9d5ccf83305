"""One intervention record: who asked, who approved, what happened under human standing and
what was reconciled, merged into one timeline, and how long until the agent's first
refused effect."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Min, Q

from leaseboard.core.models import Effect
from leaseboard.takeovers.models import Intervention
from leaseboard.takeovers.selectors.records import intervention_base


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
        intervention_base()
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
        "hold_lifted": lambda: f"lifted the operator's hold ({d.get('reason')})",
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
