"""Deciding takeover requests: approve (one transaction; its steps are in approval.py) or
refuse a stale one, reject, break-glass, and the manager's review of a break-glass."""

from __future__ import annotations

from typing import Any, Unpack

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import work_item_locked_by
from leaseboard.core.models import WorkItem
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, TakeoverConflict, ValidationFailed
from leaseboard.takeovers.models import Intervention, TakeoverRequest
from leaseboard.takeovers.services._common import (
    audited,
    locked,
    timeline,
)
from leaseboard.takeovers.services.approval import approve_locked, request_decided
from leaseboard.takeovers.services.requests import (
    TakeoverAsk,
    request_hold_lift_locked,
    request_locked,
)


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


def _noted(note: str, what: str) -> str:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed(f"{what} needs a note", param="note")
    return note


def _ended_unapproved(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    act: Act,
    actor: Actor,
    by: int | None,
    note: str,
    action: str,
    before: dict[str, Any],
    after: dict[str, Any],
    now: int,
    request_id: str,
) -> None:
    """A request leaves the queue without an approval (refused or rejected; its status
    set): the decision dated, the hold it placed lifted with it, one audit entry."""
    request_decided(req, now=now, by=by, note=note)
    lifted = request_hold_lift_locked(
        req=req, item=item, act=act, actor=actor, now=now, request_id=request_id
    )
    audited(
        act=act,
        actor=actor,
        action=action,
        obj=req,
        item=item,
        now=now,
        reason=note,
        before=before,
        after={**after, "hold_lifted": lifted},
        request_id=request_id,
    )


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
            approve_locked(
                req=req, item=item, actor=actor, note=note, request_id=request_id, now=now
            ),
            None,
        )
    # The refusal is committed (the request leaves the queue), then raised.
    _ended_unapproved(
        req=req,
        item=item,
        act=Act.APPROVE_TAKEOVER,
        actor=actor,
        by=actor.user_id if req.status == TakeoverRequest.Status.CONFLICT else None,
        note=refusal.detail,
        action="takeover.approve_refused",
        before={"status": "pending", "target_epoch": req.target_epoch},
        after={"status": req.status, "current_epoch": item.epoch},
        now=now,
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
    note = _noted(note, "a rejection")
    req, item = _pending_locked(request_pk)
    now = db_now_ms()
    authorize(
        Act.REJECT_TAKEOVER, actor, requester_user_id=req.requested_by_id, work_item_id=item.pk
    )
    req.status = TakeoverRequest.Status.REJECTED
    _ended_unapproved(
        req=req,
        item=item,
        act=Act.REJECT_TAKEOVER,
        actor=actor,
        by=actor.user_id,
        note=note,
        action="takeover.reject",
        before={"status": "pending"},
        after={"status": "rejected"},
        now=now,
        request_id=request_id,
    )
    return req


@transaction.atomic(durable=True)
def takeover_break_glass(**ask: Unpack[TakeoverAsk]) -> Intervention:
    """Take over at once, without an approver; the intervention is flagged for review."""
    req = request_locked(now=db_now_ms(), break_glass=True, **ask)
    item = work_item_locked_by(item_id=req.work_item_id)  # already ours; re-read for the grant
    now = db_now_ms()  # read after the locks, so the grant is dated after any wait
    return approve_locked(
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
    note = _noted(note, "a review")
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
