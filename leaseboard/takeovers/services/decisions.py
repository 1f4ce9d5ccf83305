"""Deciding takeover requests: approve (one transaction: revoke, new epoch, human or agent
grant, intervention, alerts answered, audit), reject, break-glass, and the manager's
review of a break-glass. Each step of an approval is a module-level name, so tests can
inject a failure at any of them."""

from __future__ import annotations

from typing import Unpack

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import work_item_locked_by
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
from leaseboard.domain.errors import LeaseboardError, TakeoverConflict, ValidationFailed
from leaseboard.takeovers.models import Intervention, TakeoverRequest
from leaseboard.takeovers.services._common import (
    audited,
    lease_view,
    locked,
    standing_max_ms,
    timeline,
)
from leaseboard.takeovers.services.requests import (
    TakeoverAsk,
    request_hold_lift_locked,
    request_locked,
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


def _decided(req: TakeoverRequest, *, now: int, by: int | None, note: str) -> None:
    """Date, sign and note the decision whose status the caller has set on the request."""
    req.decided_at_ms, req.decided_by_id, req.decision_note = now, by, note[:1000]
    req.save(update_fields=["status", "decided_at_ms", "decided_by", "decision_note"])


def _approve_locked(
    *, req: TakeoverRequest, item: WorkItem, actor: Actor, note: str, request_id: str, now: int
) -> Intervention:
    """Revoke, grant, open the intervention, answer alerts, audit: the caller's transaction
    holds the work item's lock and has checked the request is fresh. The clock is read
    again after the live lease's lock: the approval may have waited for that row while its
    holder released or renewed it, and a grant dated by the caller's earlier reading would
    start before the end it waited for (the chaos run's one-live-holder check found one
    18 ms early)."""
    live = live_lease_locked(item)
    now = max(now, db_now_ms())
    if live is not None and lease_expire_if_due_locked(live, now):
        live = None
    before = lease_view(live)
    # Every open alert on the item (jeopardy, expiry, stale effects) is answered by this,
    # but blocked work stays open until its effects are reconciled, under this standing.
    resolved = alerts_resolve(
        work_item_id=item.id, now_ms=now, keep_kinds=(Alert.Kind.NEEDS_RECONCILIATION,)
    )
    revoked = None
    if live is not None:
        reason = (
            f"takeover #{req.id} approved by {actor.name}: {req.reason_category}: {req.reason_text}"
        )
        revoked = lease_revoke_locked(lease=live, actor=actor, now_ms=now, reason=reason)
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
    _decided(req, now=now, by=actor.user_id, note=note)
    iv = _intervention_open(req=req, item=item, revoked=revoked, lease=lease, actor=actor, now=now)
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
        timeline(
            iv,
            "revoked",
            now,
            actor.name,
            lease_id=str(revoked.id),
            epoch=revoked.epoch,
            holder=revoked.holder.name,
        )
    timeline(
        iv,
        "granted",
        now,
        actor.name,
        lease_id=str(lease.id),
        epoch=lease.epoch,
        holder=req.grantee.name,
        expires_at_ms=lease.expires_at_ms,
    )
    if resolved:
        timeline(iv, "alerts_resolved", now, actor.name, count=resolved)
    if lifted:
        timeline(iv, "hold_lifted", now, actor.name, reason=lifted)
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


def _pending_locked(request_pk: int) -> tuple[TakeoverRequest, WorkItem]:
    req, item = locked(
        TakeoverRequest,
        request_pk,
        what="takeover request",
        related=("grantee", "requested_by", "target_holder"),
    )
    if req.status != TakeoverRequest.Status.PENDING:
        raise ValidationFailed(f"the request is already {req.status}")
    return req, item


def _freshness(req: TakeoverRequest, item: WorkItem, now: int) -> LeaseboardError | None:
    """Takeover freshness: an expired request, or one whose target moved, is refused."""
    if now >= req.decide_by_ms:
        req.status = TakeoverRequest.Status.EXPIRED
        return TakeoverConflict("the request expired before a decision")
    if item.epoch != req.target_epoch:
        req.status = TakeoverRequest.Status.CONFLICT
        return TakeoverConflict(
            f"the work item moved from epoch {req.target_epoch} to {item.epoch} since the "
            "request; ask again if a takeover is still needed",
            current_epoch=item.epoch,
            your_epoch=req.target_epoch,
        )
    return None


@transaction.atomic(durable=True)
def _approve_or_refuse(
    *, request_pk: int, actor: Actor, note: str, request_id: str
) -> tuple[Intervention | None, LeaseboardError | None]:
    req, item = _pending_locked(request_pk)
    now = db_now_ms()
    authorize(
        Act.APPROVE_TAKEOVER, actor, requester_user_id=req.requested_by_id, work_item_id=item.pk
    )
    refusal = _freshness(req, item, now)
    if refusal is None:
        return (
            _approve_locked(
                req=req, item=item, actor=actor, note=note, request_id=request_id, now=now
            ),
            None,
        )
    # The refusal is committed (the request leaves the queue), then raised.
    by = actor.user_id if req.status == TakeoverRequest.Status.CONFLICT else None
    _decided(req, now=now, by=by, note=refusal.detail)
    lifted = request_hold_lift_locked(
        req=req, item=item, act=Act.APPROVE_TAKEOVER, actor=actor, now=now, request_id=request_id
    )
    audited(
        act=Act.APPROVE_TAKEOVER,
        actor=actor,
        action="takeover.approve_refused",
        obj=req,
        item=item,
        now=now,
        reason=refusal.detail,
        before={"status": "pending", "target_epoch": req.target_epoch},
        after={"status": req.status, "current_epoch": item.epoch, "hold_lifted": lifted},
        request_id=request_id,
    )
    return None, refusal


def takeover_approve(
    *, request_pk: int, actor: Actor, note: str = "", request_id: str = ""
) -> Intervention:
    """Approve in one transaction, or refuse with `takeover_conflict` if the target's epoch
    moved (or the request expired). Never by the requester."""
    intervention, refusal = _approve_or_refuse(
        request_pk=request_pk, actor=actor, note=note, request_id=request_id
    )
    if refusal is not None:
        raise refusal
    assert intervention is not None
    return intervention


@transaction.atomic(durable=True)
def takeover_reject(
    *, request_pk: int, actor: Actor, note: str, request_id: str = ""
) -> TakeoverRequest:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    req, item = _pending_locked(request_pk)
    now = db_now_ms()
    authorize(
        Act.REJECT_TAKEOVER, actor, requester_user_id=req.requested_by_id, work_item_id=item.pk
    )
    req.status = TakeoverRequest.Status.REJECTED
    _decided(req, now=now, by=actor.user_id, note=note)
    lifted = request_hold_lift_locked(
        req=req, item=item, act=Act.REJECT_TAKEOVER, actor=actor, now=now, request_id=request_id
    )
    audited(
        act=Act.REJECT_TAKEOVER,
        actor=actor,
        action="takeover.reject",
        obj=req,
        item=item,
        now=now,
        reason=note,
        before={"status": "pending"},
        after={"status": "rejected", "hold_lifted": lifted},
        request_id=request_id,
    )
    return req


@transaction.atomic(durable=True)
def takeover_break_glass(**ask: Unpack[TakeoverAsk]) -> Intervention:
    """Take over at once, without an approver; the intervention is flagged for review."""
    req = request_locked(now=db_now_ms(), break_glass=True, **ask)
    item = work_item_locked_by(item_id=req.work_item_id)  # already ours; re-read for the grant
    now = db_now_ms()  # read after the locks, so the grant is dated after any wait
    return _approve_locked(
        req=req,
        item=item,
        actor=ask["actor"],
        note="break-glass",
        request_id=ask.get("request_id", ""),
        now=now,
    )


@transaction.atomic(durable=True)
def intervention_review(
    *, intervention_pk: int, actor: Actor, note: str, request_id: str = ""
) -> Intervention:
    """A manager reviews a break-glass intervention after the fact."""
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a review needs a note", param="note")
    iv, item = locked(Intervention, intervention_pk, what="intervention")
    now = db_now_ms()
    authorize(
        Act.REVIEW_INTERVENTION, actor, requester_user_id=iv.approved_by_id, work_item_id=item.pk
    )
    if not iv.break_glass:
        raise ValidationFailed("only break-glass interventions need a review")
    if iv.reviewed_at_ms is not None:
        raise ValidationFailed("this intervention was already reviewed")
    iv.reviewed_at_ms, iv.reviewed_by_id, iv.review_note = now, actor.user_id, note[:1000]
    iv.save(update_fields=["reviewed_at_ms", "reviewed_by", "review_note"])
    timeline(iv, "reviewed", now, actor.name, note=note)
    audited(
        act=Act.REVIEW_INTERVENTION,
        actor=actor,
        action="intervention.review",
        obj=iv,
        item=item,
        now=now,
        reason=note,
        before={"reviewed": False},
        after={"reviewed": True},
        request_id=request_id,
    )
    return iv
