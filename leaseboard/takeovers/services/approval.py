"""Approving a takeover, step by step, in the caller's transaction: revoke the live lease,
grant the grantee's at a new epoch, open the intervention and its timeline, answer the
item's alerts, audit. Each step is a module-level name, so tests can inject a failure at
any of them (the approval is all or nothing)."""

from __future__ import annotations

from typing import Any

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Executor, Lease, WorkItem
from leaseboard.core.services.alerts import alerts_resolve
from leaseboard.core.services.holds import work_hold_lift_locked
from leaseboard.core.services.leases import (
    executor_id_of,
    fence_of_latest_locked,
    lease_expire_if_due_locked,
    lease_grant_locked,
    lease_revoke_locked,
    live_lease_locked,
)
from leaseboard.domain.authority import Act
from leaseboard.takeovers.models import Intervention, TakeoverRequest
from leaseboard.takeovers.services._common import (
    audited,
    lease_view,
    standing_max_ms,
    timeline,
)


def _intervention_open(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    revoked: Lease | None,
    lease: Lease,
    actor: Actor,
    now: int,
) -> Intervention:
    to_agent = req.grantee.kind == Executor.Kind.AGENT
    # deliberate: the Intervention row named field by field, its one write.
    return Intervention.objects.create(
        request=req,
        work_item=item,
        queue_id=item.queue_id,
        revoked_lease=revoked,
        agent=revoked.holder if revoked else (req.target_holder or _last_agent(item, lease)),
        lease=lease,
        grantee=req.grantee,
        epoch=lease.epoch,
        reason_category=req.reason_category,
        reason_text=req.reason_text,
        requested_by_id=req.requested_by_id,
        approved_by_id=actor.human_user_id,
        requested_at_ms=req.requested_at_ms,
        decided_at_ms=now,
        break_glass=req.break_glass,
        outcome=Intervention.Outcome.GRANTED_TO_AGENT if to_agent else Intervention.Outcome.OPEN,
        ended_at_ms=now if to_agent else None,
    )


def _grant(*, req: TakeoverRequest, item: WorkItem, now: int, by: int) -> Lease:
    """The grantee's lease at a new epoch: a human's for the standing asked for (humans do
    not renew; the countdown to expires_at is their warning), an agent's as an acquire.
    Standing comes at once; the fence the revoked holder's open tokens set is inherited,
    and no effect is authorized under the new lease before it passes."""
    human = req.grantee.kind == Executor.Kind.HUMAN
    return lease_grant_locked(
        item=item,
        holder=req.grantee,
        now_ms=now,
        grant_kind=Lease.GrantKind.TAKEOVER,
        ttl_ms=req.standing_ms if human else None,
        jeopardy_after_ms=req.standing_ms if human else None,
        max_lifetime_ms=max(standing_max_ms(), req.standing_ms) if human else None,
        takeover_reason=f"{req.reason_category}: {req.reason_text}",
        actor_id=by,
        fenced_until_ms=fence_of_latest_locked(item),
    )


def _last_agent(item: WorkItem, granted: Lease) -> Executor | None:
    """The agent that held the work item last before this grant, even if its lease had
    already expired when the takeover was asked for: the record names who lost the work."""
    last = (
        Lease.objects.filter(
            work_item=item, holder__kind=Executor.Kind.AGENT, epoch__lt=granted.epoch
        )
        .select_related("holder")
        .order_by("-epoch")
        .first()
    )
    return last.holder if last else None


def request_decided(req: TakeoverRequest, *, now: int, by: int | None, note: str) -> None:
    """Date, sign and note the decision whose status the caller has set on the request."""
    req.decided_at_ms, req.decided_by_id, req.decision_note = now, by, note[:1000]
    req.save(update_fields=["status", "decided_at_ms", "decided_by", "decision_note"])


def _live_locked(item: WorkItem, now: int) -> tuple[Lease | None, int]:
    """The item's live lease, locked (None if it ended by time), and the clock read again
    after that lock."""
    live = live_lease_locked(item)
    now = max(now, db_now_ms())
    if live is not None and lease_expire_if_due_locked(live, now):
        live = None
    return live, now


def _live_revoked(
    *, req: TakeoverRequest, live: Lease | None, actor: Actor, now: int
) -> Lease | None:
    if live is None:
        return None
    reason = (
        f"takeover #{req.id} approved by {actor.name}: {req.reason_category}: {req.reason_text}"
    )
    return lease_revoke_locked(lease=live, actor=actor, now_ms=now, reason=reason)


def _named(lease: Lease, holder: str) -> dict[str, Any]:
    """A lease as a timeline step names it."""
    return {"lease_id": str(lease.id), "epoch": lease.epoch, "holder": holder}


def _approval_timeline(
    iv: Intervention,
    *,
    req: TakeoverRequest,
    actor: Actor,
    now: int,
    note: str,
    revoked: Lease | None,
    lease: Lease,
    resolved: int,
    lifted: str,
) -> None:
    """The approved intervention's first steps: asked, decided, revoked, granted, and what
    the decision answered on the way."""
    timeline(
        iv,
        "requested",
        req.requested_at_ms,
        req.requested_by.get_username(),
        reason_category=req.reason_category,
        reason=req.reason_text,
        standing_ms=req.standing_ms,
        grantee=req.grantee.name,
    )
    timeline(iv, "break_glass" if req.break_glass else "approved", now, actor.name, note=note)
    if revoked is not None:
        timeline(iv, "revoked", now, actor.name, **_named(revoked, revoked.holder.name))
    timeline(
        iv,
        "granted",
        now,
        actor.name,
        **_named(lease, req.grantee.name),
        expires_at_ms=lease.expires_at_ms,
    )
    if resolved:
        timeline(iv, "alerts_resolved", now, actor.name, count=resolved)
    if lifted:
        timeline(iv, "hold_lifted", now, actor.name, reason=lifted)


def approve_locked(
    *, req: TakeoverRequest, item: WorkItem, actor: Actor, note: str, request_id: str, now: int
) -> Intervention:
    """Revoke, grant, open the intervention, answer alerts, audit: the caller's transaction
    holds the work item's lock and has checked the request is fresh. The clock is read
    again after the live lease's lock: the approval may have waited for that row while its
    holder released or renewed it, and a grant dated by the caller's earlier reading would
    start before the end it waited for (the chaos run's one-live-holder check found one
    18 ms early)."""
    live, now = _live_locked(item, now)
    before = lease_view(live)
    # Every open alert on the item (jeopardy, expiry, stale effects) is answered by this,
    # but blocked work stays open until its effects are reconciled, under this standing.
    resolved = alerts_resolve(
        work_item_id=item.id, now_ms=now, keep_kinds=(Alert.Kind.NEEDS_RECONCILIATION,)
    )
    revoked = _live_revoked(req=req, live=live, actor=actor, now=now)
    # The hold was the item's (it outlived every lease); this decision gives the work to
    # someone an operator chose, so it ends here, recorded as such.
    act = Act.BREAK_GLASS if req.break_glass else Act.APPROVE_TAKEOVER
    lifted = work_hold_lift_locked(
        item=item,
        act=act,
        actor=actor,
        now_ms=now,
        why=f"takeover #{req.id} {'broke the glass' if req.break_glass else 'approved'}",
        request_id=request_id,
    )
    lease = _grant(req=req, item=item, now=now, by=executor_id_of(actor))
    req.status = TakeoverRequest.Status.APPROVED
    request_decided(req, now=now, by=actor.user_id, note=note)
    iv = _intervention_open(req=req, item=item, revoked=revoked, lease=lease, actor=actor, now=now)
    _approval_timeline(
        iv,
        req=req,
        actor=actor,
        now=now,
        note=note,
        revoked=revoked,
        lease=lease,
        resolved=resolved,
        lifted=lifted,
    )
    audited(
        act=act,
        actor=actor,
        action="takeover.break_glass_grant" if req.break_glass else "takeover.approve",
        obj=req,
        item=item,
        now=now,
        reason=f"{req.reason_category}: {req.reason_text}" + (f" | note: {note}" if note else ""),
        before=before,
        after={**lease_view(lease), "intervention": iv.id, "alerts_resolved": resolved},
        request_id=request_id,
    )
    return iv
