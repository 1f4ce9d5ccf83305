"""The operator's standing: every open intervention granted to them, with its lease, time
left (and a warning once less than a fifth is left), effects to reconcile and the latest
checkpoint; and those that lapsed in the last day, kept listed with a way to take the work
over again. 5 queries; nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import F, OuterRef, Q, Subquery

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Checkpoint, Effect, Executor, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.paging import page_version
from leaseboard.takeovers.models import Intervention

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # the project's user model (Django's own)

WARN_FRACTION = 0.2  # warn when less than this share of the standing is left
LAPSED_VISIBLE_MS = 24 * 3_600_000
LIMIT = 20


@dataclass
class Standing:
    intervention: Intervention
    lease: Lease
    expires_in_ms: int
    max_in_ms: int
    total_ms: int  # the standing's length, from its grant to its current expiry
    live: bool
    unreconciled: list[Effect]
    effects: list[Effect]
    checkpoint: Checkpoint | None

    @property
    def warn(self) -> bool:
        """Less than a fifth of the standing is left: time to extend, hand back or finish."""
        return self.live and self.expires_in_ms <= self.total_ms * WARN_FRACTION

    @property
    def lapsed(self) -> bool:
        return not self.live


@dataclass(frozen=True)
class KnownAgent:
    """An agent to assign work to, and when it was last heard from (its latest renewal or
    grant; None: it never held a lease)."""

    name: str
    queues: tuple[str, ...]
    all_queues: bool
    last_seen_ms: int | None


@dataclass
class StandingPage:
    now_ms: int
    standings: list[Standing]
    version: str = ""
    agents: list[KnownAgent] = field(default_factory=list)  # for the assign form

    @property
    def warnings(self) -> list[Standing]:
        return [s for s in self.standings if s.warn]


def my_standing(user: User) -> StandingPage:
    """Open interventions whose standing was granted to `user`, then the ones that lapsed
    in the last LAPSED_VISIBLE_MS."""
    now = db_now_ms()
    ivs = list(
        Intervention.objects.filter(grantee__user=user)
        .filter(
            Q(outcome=Intervention.Outcome.OPEN)
            | Q(outcome=Intervention.Outcome.LAPSED, ended_at_ms__gte=now - LAPSED_VISIBLE_MS)
        )
        .select_related("lease", "work_item", "work_item__queue", "agent", "grantee")
        .defer("lease__recent_renewals", "work_item__scope")
        .order_by("-decided_at_ms")[:LIMIT]
    )
    item_ids = [iv.work_item_id for iv in ivs]
    effects: dict[int, list[Effect]] = {i: [] for i in item_ids}
    for e in (
        Effect.objects.filter(work_item_id__in=item_ids)
        .select_related("executor")
        .defer("fencing_token")
        .order_by("-proposed_at_ms")[:500]
    ):
        effects[e.work_item_id].append(e)
    checkpoints: dict[int, Checkpoint] = {}
    for cp in Checkpoint.objects.filter(work_item_id__in=item_ids).order_by("work_item_id", "-seq"):
        checkpoints.setdefault(cp.work_item_id, cp)
    out = []
    for iv in ivs:
        lease = iv.lease
        live = (
            iv.outcome == Intervention.Outcome.OPEN
            and lease.state in LIVE_STATES
            and lease.expires_at_ms > now
        )
        mine = effects[iv.work_item_id]
        out.append(
            Standing(
                intervention=iv,
                lease=lease,
                expires_in_ms=max(0, lease.expires_at_ms - now),
                max_in_ms=max(0, lease.max_expires_at_ms - now),
                total_ms=max(1, lease.expires_at_ms - lease.granted_at_ms),
                live=live,
                unreconciled=[e for e in mine if e.needs_reconciliation],
                effects=mine[:50],
                checkpoint=checkpoints.get(iv.work_item_id),
            )
        )
    out.sort(key=lambda s: (not s.live, -(s.intervention.decided_at_ms or 0)))
    page = StandingPage(now, out, agents=known_agents() if any(s.live for s in out) else [])
    page.version = _version(page)
    return page


AGENTS_LIMIT = 200


def known_agents() -> list[KnownAgent]:
    """Active agents, most recently heard from first (one query): whom the assign form
    offers, so work goes to an agent that is alive rather than to a typed name."""
    latest = Lease.objects.filter(holder_id=OuterRef("pk")).order_by("-renewed_at_ms")
    rows = (
        Executor.objects.filter(kind=Executor.Kind.AGENT, is_active=True)
        .annotate(last_seen=Subquery(latest.values("renewed_at_ms")[:1]))
        .order_by(F("last_seen").desc(nulls_last=True), "name")
        .values_list("name", "queues", "all_queues", "last_seen")[:AGENTS_LIMIT]
    )
    return [KnownAgent(n, tuple(q or ()), a, seen) for n, q, a, seen in rows]


def _version(page: StandingPage) -> str:
    body = [
        [
            s.intervention.id,
            s.intervention.outcome,
            s.live,
            s.warn,
            s.lease.state,
            s.lease.expires_at_ms,
            [(str(e.id), e.decision, e.outcome, e.resolution) for e in s.effects],
            s.checkpoint.id if s.checkpoint else None,
        ]
        for s in page.standings
    ]
    return page_version(body)
