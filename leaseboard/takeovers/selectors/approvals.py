"""The approver's inbox: pending takeover requests and effects waiting for approval, each
with what is asked, whether the lease is still live, its holder, the evidence (the work
item's latest lease events and its effects without a known outcome) and how long is left
to decide; plus the approvals that expired because their lease ended first. 6 queries
whatever the number of rows; nothing here writes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, LeaseEvent
from leaseboard.core.paging import page_version
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.takeovers.models import TakeoverRequest

LIMIT = 200
EVIDENCE_EVENTS = 3
EXPIRED_LIMIT = 20
# Payload keys an approver looks for first (a payment's amount and payee, a deploy's target).
SUMMARY_KEYS = ("amount", "amount_cents", "currency", "payee", "to", "account", "env", "version")


def _certainty(lease: Lease | None, now: int) -> str | None:
    if lease is None:
        return None
    times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
    return state_at(times, now).value


def payload_summary(payload: Any, limit: int = 4) -> list[tuple[str, str]]:
    """The few payload fields that say what an effect does, known keys first."""
    if not isinstance(payload, dict):
        return []
    keys = [k for k in SUMMARY_KEYS if k in payload]
    keys += [k for k in sorted(payload) if k not in keys]
    out = []
    for k in keys[:limit]:
        value = payload[k]
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out.append((str(k)[:40], text[:80]))
    return out


@dataclass
class Evidence:
    events: list[LeaseEvent] = field(default_factory=list)  # newest first
    open_effects: list[Effect] = field(default_factory=list)  # no known outcome


@dataclass
class RequestRow:
    request: TakeoverRequest
    certainty: str | None  # of the lease the requester saw
    decide_in_ms: int
    evidence: Evidence


# What the lease of a waiting effect says about the wait, beside its own deadline.
LEASE_NOTES = {
    Certainty.ACTIVE.value: "holder renewing",
    Certainty.JEOPARDY.value: (
        "holder not renewing (in jeopardy): if the lease ends, this request lapses"
    ),
}
LEASE_ENDED_NOTE = "lease ended: this request lapses"


def lease_note(certainty: str | None) -> str:
    return LEASE_NOTES.get(certainty or "", LEASE_ENDED_NOTE)


@dataclass
class EffectRow:
    effect: Effect
    certainty: str | None
    decide_in_ms: int  # until the approval's own decide-by time (docs/approvals.md)
    summary: list[tuple[str, str]]
    evidence: Evidence

    @property
    def lease_note(self) -> str:
        return lease_note(self.certainty)


@dataclass
class Inbox:
    now_ms: int
    requests: list[RequestRow]
    effects: list[EffectRow]
    expired: list[Effect]  # waiting approvals whose lease ended before a decision
    version: str = ""

    @property
    def count(self) -> int:
        return len(self.requests) + len(self.effects)


def _evidence(item_ids: set[int]) -> dict[int, Evidence]:
    out = {i: Evidence() for i in item_ids}
    if not item_ids:
        return out
    # Newest events of these items (lease_event_work_idx), a few each.
    for ev in (
        LeaseEvent.objects.filter(work_item_id__in=item_ids)
        .select_related("actor")
        .order_by("-at_ms", "-id")[: EVIDENCE_EVENTS * len(item_ids) * 4]
    ):
        if len(out[ev.work_item_id].events) < EVIDENCE_EVENTS:
            out[ev.work_item_id].events.append(ev)
    for e in (
        Effect.objects.filter(work_item_id__in=item_ids, decision=Effect.Decision.AUTHORIZED)
        .filter(Q(outcome="") | Q(outcome=Effect.Outcome.UNKNOWN), resolution="")
        .defer("payload", "fencing_token")
        .order_by("-proposed_at_ms")[:LIMIT]
    ):
        out[e.work_item_id].open_effects.append(e)
    return out


def inbox(limit: int = LIMIT) -> Inbox:
    now = db_now_ms()
    requests = list(
        TakeoverRequest.objects.filter(status=TakeoverRequest.Status.PENDING)
        .select_related("work_item", "requested_by", "grantee", "target_holder", "target_lease")
        .defer("target_lease__recent_renewals", "work_item__scope")
        .order_by("decide_by_ms", "id")[:limit]
    )
    waiting = list(
        Effect.objects.filter(decision=Effect.Decision.PENDING_APPROVAL)
        .select_related("work_item", "executor", "lease__holder")
        .defer("fencing_token", "lease__recent_renewals", "work_item__scope")
        .order_by("proposed_at_ms", "id")[: limit + EXPIRED_LIMIT]
    )
    live: list[tuple[Effect, str | None]] = []
    expired: list[tuple[Effect, str | None]] = []
    for e in waiting:
        c = _certainty(e.lease, now)
        (live if c in (Certainty.ACTIVE, Certainty.JEOPARDY) else expired).append((e, c))
    evidence = _evidence(
        {r.work_item_id for r in requests} | {e.work_item_id for e, _ in live[:limit]}
    )
    page = Inbox(
        now_ms=now,
        requests=[
            RequestRow(
                request=r,
                certainty=_certainty(r.target_lease, now),
                decide_in_ms=max(0, r.decide_by_ms - now),
                evidence=evidence[r.work_item_id],
            )
            for r in requests
        ],
        effects=[
            EffectRow(
                effect=e,
                certainty=c,
                decide_in_ms=_decide_in_ms(e, now),
                summary=payload_summary(e.payload),
                evidence=evidence[e.work_item_id],
            )
            for e, c in live[:limit]
        ],
        expired=[e for e, _ in expired[:EXPIRED_LIMIT]],
    )
    page.version = _version(page)
    return page


def _version(page: Inbox) -> str:
    body = {
        "r": [
            [r.request.id, r.certainty, [ev.id for ev in r.evidence.events]] for r in page.requests
        ],
        "e": [[str(r.effect.id), r.certainty, r.effect.lease_id] for r in page.effects],
        "x": [str(e.id) for e in page.expired],
        "o": sorted(
            {
                str(e.id)
                for evidence in (
                    *(r.evidence for r in page.requests),
                    *(r.evidence for r in page.effects),
                )
                for e in evidence.open_effects
            }
        ),
    }
    return page_version(body)


@dataclass
class EffectDecisionPage:
    """One effect waiting (or no longer waiting) for an approver: exactly what would be
    decided on (kind, target, the canonical payload and its digest), and whether it can
    still be decided."""

    effect: Effect
    now_ms: int
    certainty: str | None
    decide_in_ms: int
    payload_json: str  # the stored payload, keys sorted, indented: every byte shown
    summary: list[tuple[str, str]]
    evidence: Evidence

    @property
    def waiting(self) -> bool:
        return self.effect.decision == Effect.Decision.PENDING_APPROVAL

    @property
    def lease_note(self) -> str:
        return lease_note(self.certainty)


def effect_decision_page(effect_id: Any) -> EffectDecisionPage | None:
    now = db_now_ms()
    effect = (
        Effect.objects.filter(id=effect_id)
        .select_related("work_item", "executor", "lease__holder", "decided_by")
        .defer("fencing_token", "lease__recent_renewals", "work_item__scope")
        .first()
    )
    if effect is None:
        return None
    return EffectDecisionPage(
        effect=effect,
        now_ms=now,
        certainty=_certainty(effect.lease, now),
        decide_in_ms=_decide_in_ms(effect, now),
        payload_json=json.dumps(effect.payload, sort_keys=True, indent=2, ensure_ascii=False),
        summary=payload_summary(effect.payload, limit=100),
        evidence=_evidence({effect.work_item_id})[effect.work_item_id],
    )


def _decide_in_ms(effect: Effect, now: int) -> int:
    """Until the approval's own decide-by time. The lease's expiry is not a deadline to
    count down: its holder renews it while it waits (the SDK does), and were it to end,
    the request lapses, which the lease's state beside the countdown says (`lease_note`).
    An effect from before decide-by times counts down to its lease's expiry."""
    if effect.decide_by_ms is not None:
        return max(0, effect.decide_by_ms - now)
    return max(0, (effect.lease.expires_at_ms if effect.lease else now) - now)
