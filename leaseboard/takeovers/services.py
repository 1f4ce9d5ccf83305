"""Takeover writes: request, approve/reject, break-glass, work under human standing,
commit-time effect approvals, bulk requests, and expiry of undecided requests.

Each public service is the outermost transaction (`atomic(durable=True)`). Lock order is
the core's: work item, then lease, then our own rows. Approval is one transaction; each of
its steps is a module-level name so tests can inject a failure at any of them.

Ending standing:
- complete: refused while anything is unreconciled (core `work_complete_locked`);
- hand back: the human lease is *released*; the agent pool's next acquire raises the epoch
  (no placeholder grant that nobody renews). Refused while effects are unreconciled when
  the queue would refuse agents anyway;
- assign: a `grant_kind="assign"` lease for the named agent at a new epoch, same
  transaction. Hand-back and assign are compare-and-sets on (lease id, epoch); a retry of
  an action that already happened answers as before and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert, Effect, Executor, Lease, LeaseEvent, WorkItem
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.audit import audit_record
from leaseboard.core.services.effects import effect_error, effect_reconcile
from leaseboard.core.services.executors import human_executor_for
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.services.leases import (
    lease_end_locked,
    lease_expire_if_due_locked,
    lease_grant_locked,
    lease_revoke_locked,
    live_lease_locked,
    parse_lease_id,
    unreconciled_effects_exist,
)
from leaseboard.core.services.work import work_complete_locked
from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at
from leaseboard.domain.errors import (
    ENDED_STATE_ERRORS,
    Forbidden,
    InJeopardy,
    LeaseboardError,
    LeaseExpired,
    NeedsReconciliation,
    NotFound,
    StaleEpoch,
    TakeoverConflict,
    ValidationFailed,
)
from leaseboard.takeovers.models import (
    BulkTakeover,
    Intervention,
    InterventionEvent,
    ReasonCategory,
    TakeoverRequest,
)

MINUTE_MS = 60_000
BULK_MAX_ITEMS = 200


def standing_default_ms() -> int:
    return settings.LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS


def standing_min_ms() -> int:
    return settings.LEASEBOARD_TAKEOVER_MIN_STANDING_MS


def standing_max_ms() -> int:
    """The most standing a human may hold in total, extensions included."""
    return settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS


def decision_ttl_ms() -> int:
    """How long a request waits for a decision before it expires."""
    return settings.LEASEBOARD_TAKEOVER_DECISION_TTL_MS


@dataclass(frozen=True)
class BulkOutcome:
    work_key: str
    ok: bool
    request_id: int | None = None
    code: str | None = None
    detail: str = ""


# --- small helpers -----------------------------------------------------------------------


def _name(user: Any) -> str:
    return user.get_username()


def _validate_reason(category: str, text: str) -> str:
    if category not in ReasonCategory.values:
        raise ValidationFailed("choose a reason category", param="reason_category")
    text = (text or "").strip()
    if not text:
        raise ValidationFailed("a takeover needs a reason", param="reason_text")
    if len(text) > 1000:
        raise ValidationFailed("the reason is at most 1000 characters", param="reason_text")
    return text


def _validate_standing(standing_ms: int | None) -> int:
    value = standing_default_ms() if standing_ms is None else standing_ms
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValidationFailed("standing is a number of milliseconds", param="standing_ms")
    low, high = standing_min_ms(), standing_max_ms()
    if not low <= value <= high:
        raise ValidationFailed(
            f"standing must be between {low // MINUTE_MS} and {high // MINUTE_MS} minutes",
            param="standing_ms",
        )
    return value


def _agent_named(name: str) -> Executor:
    agent = Executor.objects.filter(name=name, kind=Executor.Kind.AGENT, is_active=True).first()
    if agent is None:
        raise ValidationFailed(f"no active agent named {name!r}", param="agent")
    return agent


def _item_locked(*, key: str | None = None, item_id: int | None = None) -> WorkItem:
    qs = WorkItem.objects.select_for_update(no_key=True, of=("self",)).select_related("queue")
    item = qs.filter(key=key).first() if key is not None else qs.filter(id=item_id).first()
    if item is None:
        raise NotFound(f"no work item {key!r}" if key is not None else "no such work item")
    return item


def _event(intervention: Intervention, kind: str, at_ms: int, actor: str, **detail: Any) -> None:
    InterventionEvent.objects.create(
        intervention=intervention, kind=kind, at_ms=at_ms, actor_name=actor, detail=detail
    )


def _lease_view(lease: Lease | None) -> dict[str, Any]:
    if lease is None:
        return {"lease_id": None}
    return {
        "lease_id": str(lease.id),
        "epoch": lease.epoch,
        "holder": lease.holder.name,
        "state": lease.state,
        "expires_at_ms": lease.expires_at_ms,
    }


# --- request ------------------------------------------------------------------------------


def _request_locked(
    *,
    work_key: str,
    user: Any,
    role: str,
    reason_category: str,
    reason_text: str,
    standing_ms: int | None,
    grantee_agent: str | None,
    request_id: str,
    now: int,
    bulk: BulkTakeover | None = None,
    break_glass: bool = False,
) -> TakeoverRequest:
    text = _validate_reason(reason_category, reason_text)
    standing = _validate_standing(standing_ms)
    item = _item_locked(key=work_key)
    if item.status != WorkItem.Status.OPEN:
        raise ValidationFailed(f"work item {work_key!r} is {item.status}")
    live = live_lease_locked(item)
    if live is not None and lease_expire_if_due_locked(live, now):
        live = None
    grantee = _agent_named(grantee_agent) if grantee_agent else human_executor_for(user)
    if live is not None and live.holder_id == grantee.id:
        raise ValidationFailed(f"{grantee.name} already holds this work item")
    req = TakeoverRequest(
        work_item=item,
        target_lease=live,
        target_epoch=item.epoch,
        target_holder=live.holder if live else None,
        requested_by=user,
        requester_role=role,
        grantee=grantee,
        reason_category=reason_category,
        reason_text=text,
        standing_ms=standing,
        break_glass=break_glass,
        bulk=bulk,
        requested_at_ms=now,
        decide_by_ms=now + decision_ttl_ms(),
        request_id=request_id[:64],
    )
    try:
        with transaction.atomic():
            req.save(force_insert=True)
    except IntegrityError:
        raise ValidationFailed(
            f"a takeover of {work_key!r} is already waiting for a decision"
        ) from None
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action="takeover.break_glass" if break_glass else "takeover.request",
        object_type="takeover_request",
        object_id=str(req.id),
        work_item=item,
        reason=f"{reason_category}: {text}",
        before=_lease_view(live),
        after={"grantee": grantee.name, "standing_ms": standing, "target_epoch": item.epoch},
        request_id=request_id,
    )
    return req


@transaction.atomic(durable=True)
def takeover_request(
    *,
    work_key: str,
    user: Any,
    role: str,
    reason_category: str,
    reason_text: str,
    standing_ms: int | None = None,
    grantee_agent: str | None = None,
    request_id: str = "",
) -> TakeoverRequest:
    """Ask to take over a work item. Standing goes to the requester's human executor
    unless an agent is named."""
    return _request_locked(
        work_key=work_key,
        user=user,
        role=role,
        reason_category=reason_category,
        reason_text=reason_text,
        standing_ms=standing_ms,
        grantee_agent=grantee_agent,
        request_id=request_id,
        now=db_now_ms(),
    )


@transaction.atomic(durable=True)
def takeover_bulk_request(
    *,
    work_keys: list[str],
    user: Any,
    role: str,
    reason_category: str,
    reason_text: str,
    idempotency_key: str,
    standing_ms: int | None = None,
    request_id: str = "",
) -> BulkTakeover:
    """One reason for many work items; per-item outcomes. A repeated idempotency key
    answers with the first bulk's outcomes and requests nothing new."""
    key = (idempotency_key or "").strip()
    if not key or len(key) > 200:
        raise ValidationFailed("an idempotency key of 1 to 200 characters is required")
    first = BulkTakeover.objects.filter(requested_by=user, idempotency_key=key).first()
    if first is not None:
        return first
    text = _validate_reason(reason_category, reason_text)
    _validate_standing(standing_ms)
    keys = list(dict.fromkeys(k.strip() for k in work_keys if k and k.strip()))
    if not keys:
        raise ValidationFailed("select at least one work item", param="work_keys")
    if len(keys) > BULK_MAX_ITEMS:
        raise ValidationFailed(f"at most {BULK_MAX_ITEMS} work items per bulk request")
    now = db_now_ms()
    bulk = BulkTakeover(
        requested_by=user,
        idempotency_key=key,
        reason_category=reason_category,
        reason_text=text,
        created_at_ms=now,
    )
    try:
        with transaction.atomic():
            bulk.save(force_insert=True)
    except IntegrityError:
        # A concurrent retry with the same key committed first.
        return BulkTakeover.objects.get(requested_by=user, idempotency_key=key)
    results: list[dict[str, Any]] = []
    for work_key in keys:
        try:
            with transaction.atomic():
                req = _request_locked(
                    work_key=work_key,
                    user=user,
                    role=role,
                    reason_category=reason_category,
                    reason_text=text,
                    standing_ms=standing_ms,
                    grantee_agent=None,
                    request_id=request_id,
                    now=now,
                    bulk=bulk,
                )
            results.append(BulkOutcome(work_key, True, request_id=req.id).__dict__)
        except LeaseboardError as exc:
            results.append(BulkOutcome(work_key, False, code=exc.code, detail=exc.detail).__dict__)
    bulk.results = results
    bulk.save(update_fields=["results"])
    return bulk


# --- decision -----------------------------------------------------------------------------


def _intervention_open(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    revoked: Lease | None,
    lease: Lease,
    approver: Any,
    now: int,
) -> Intervention:
    to_agent = req.grantee.kind == Executor.Kind.AGENT
    return Intervention.objects.create(
        request=req,
        work_item=item,
        queue_id=item.queue_id,
        revoked_lease=revoked,
        agent=revoked.holder if revoked else req.target_holder,
        lease=lease,
        grantee=req.grantee,
        epoch=lease.epoch,
        reason_category=req.reason_category,
        reason_text=req.reason_text,
        requested_by=req.requested_by,
        approved_by=approver,
        requested_at_ms=req.requested_at_ms,
        decided_at_ms=now,
        break_glass=req.break_glass,
        outcome=Intervention.Outcome.GRANTED_TO_AGENT if to_agent else Intervention.Outcome.OPEN,
        ended_at_ms=now if to_agent else None,
    )


def _alerts_resolve(*, item: WorkItem, now: int) -> int:
    """The takeover answers the work item's open alerts (jeopardy, expiry, stale effects)."""
    return Alert.objects.filter(work_item=item, resolved_at_ms__isnull=True).update(
        resolved_at_ms=now
    )


def _approve_locked(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    user: Any,
    role: str,
    note: str,
    request_id: str,
    now: int,
) -> Intervention:
    """Revoke, grant, open the intervention, resolve alerts, audit: the caller's transaction
    holds the work item's lock and has checked the request is fresh."""
    approver_exec = human_executor_for(user)
    live = live_lease_locked(item)
    if live is not None and lease_expire_if_due_locked(live, now):
        live = None
    before = _lease_view(live)
    # Every open alert on the item (jeopardy, expiry, stale effects) is answered by this.
    resolved = _alerts_resolve(item=item, now=now)
    revoked = None
    if live is not None:
        reason = (
            f"takeover #{req.id} approved by {_name(user)}: "
            f"{req.reason_category}: {req.reason_text}"
        )
        revoked = lease_revoke_locked(lease=live, now_ms=now, reason=reason, actor=approver_exec)
    if req.grantee.kind == Executor.Kind.HUMAN:
        lease = lease_grant_locked(
            item=item,
            holder=req.grantee,
            now_ms=now,
            grant_kind=Lease.GrantKind.TAKEOVER,
            ttl_ms=req.standing_ms,
            # Humans do not renew; the countdown to expires_at is their warning.
            jeopardy_after_ms=req.standing_ms,
            max_lifetime_ms=max(standing_max_ms(), req.standing_ms),
            takeover_reason=f"{req.reason_category}: {req.reason_text}",
            actor=approver_exec,
        )
    else:
        lease = lease_grant_locked(
            item=item,
            holder=req.grantee,
            now_ms=now,
            grant_kind=Lease.GrantKind.TAKEOVER,
            takeover_reason=f"{req.reason_category}: {req.reason_text}",
            actor=approver_exec,
        )
    req.status = TakeoverRequest.Status.APPROVED
    req.decided_at_ms = now
    req.decided_by = user
    req.decision_note = note[:1000]
    req.save(update_fields=["status", "decided_at_ms", "decided_by", "decision_note"])
    intervention = _intervention_open(
        req=req, item=item, revoked=revoked, lease=lease, approver=user, now=now
    )
    actor = _name(user)
    _event(
        intervention,
        "requested",
        req.requested_at_ms,
        _name(req.requested_by),
        reason_category=req.reason_category,
        reason=req.reason_text,
        standing_ms=req.standing_ms,
        grantee=req.grantee.name,
    )
    _event(intervention, "break_glass" if req.break_glass else "approved", now, actor, note=note)
    if revoked is not None:
        _event(
            intervention,
            "revoked",
            now,
            actor,
            lease_id=str(revoked.id),
            epoch=revoked.epoch,
            holder=revoked.holder.name,
        )
    _event(
        intervention,
        "granted",
        now,
        actor,
        lease_id=str(lease.id),
        epoch=lease.epoch,
        holder=req.grantee.name,
        expires_at_ms=lease.expires_at_ms,
    )
    if resolved:
        _event(intervention, "alerts_resolved", now, actor, count=resolved)
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=actor,
        actor_role=role,
        action="takeover.break_glass_grant" if req.break_glass else "takeover.approve",
        object_type="takeover_request",
        object_id=str(req.id),
        work_item=item,
        reason=f"{req.reason_category}: {req.reason_text}" + (f" | note: {note}" if note else ""),
        before=before,
        after={**_lease_view(lease), "intervention": intervention.id, "alerts_resolved": resolved},
        request_id=request_id,
    )
    return intervention


def _pending_locked(request_pk: int) -> tuple[TakeoverRequest, WorkItem]:
    peek = TakeoverRequest.objects.filter(id=request_pk).values("work_item_id").first()
    if peek is None:
        raise NotFound(f"no takeover request {request_pk}")
    item = _item_locked(item_id=peek["work_item_id"])
    req = (
        TakeoverRequest.objects.select_for_update(no_key=True, of=("self",))
        .select_related("grantee", "requested_by", "target_holder")
        .get(id=request_pk)
    )
    if req.status != TakeoverRequest.Status.PENDING:
        raise ValidationFailed(f"the request is already {req.status}")
    return req, item


@transaction.atomic(durable=True)
def _approve_or_refuse(
    *, request_pk: int, user: Any, role: str, note: str, request_id: str
) -> tuple[Intervention | None, LeaseboardError | None]:
    req, item = _pending_locked(request_pk)
    now = db_now_ms()
    if req.requested_by_id == user.id:
        raise Forbidden("an approver may not approve their own takeover request")
    refusal: LeaseboardError | None = None
    if now >= req.decide_by_ms:
        req.status = TakeoverRequest.Status.EXPIRED
        refusal = TakeoverConflict("the request expired before a decision")
    elif item.epoch != req.target_epoch:
        req.status = TakeoverRequest.Status.CONFLICT
        refusal = TakeoverConflict(
            f"the work item moved from epoch {req.target_epoch} to {item.epoch} since the "
            "request; ask again if a takeover is still needed",
            current_epoch=item.epoch,
            your_epoch=req.target_epoch,
        )
    if refusal is not None:
        # The refusal is committed (the request leaves the queue), then raised.
        req.decided_at_ms = now
        req.decided_by = user if req.status == TakeoverRequest.Status.CONFLICT else None
        req.decision_note = refusal.detail[:1000]
        req.save(update_fields=["status", "decided_at_ms", "decided_by", "decision_note"])
        audit_record(
            at_ms=now,
            actor_user_id=user.id,
            actor_name=_name(user),
            actor_role=role,
            action="takeover.approve_refused",
            object_type="takeover_request",
            object_id=str(req.id),
            work_item=item,
            reason=refusal.detail,
            before={"status": "pending", "target_epoch": req.target_epoch},
            after={"status": req.status, "current_epoch": item.epoch},
            request_id=request_id,
        )
        return None, refusal
    return (
        _approve_locked(
            req=req, item=item, user=user, role=role, note=note, request_id=request_id, now=now
        ),
        None,
    )


def takeover_approve(
    *, request_pk: int, user: Any, role: str, note: str = "", request_id: str = ""
) -> Intervention:
    """Approve in one transaction, or refuse with `takeover_conflict` if the target's epoch
    moved (or the request expired). Never by the requester."""
    intervention, refusal = _approve_or_refuse(
        request_pk=request_pk, user=user, role=role, note=note, request_id=request_id
    )
    if refusal is not None:
        raise refusal
    assert intervention is not None
    return intervention


@transaction.atomic(durable=True)
def takeover_reject(
    *, request_pk: int, user: Any, role: str, note: str, request_id: str = ""
) -> TakeoverRequest:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    req, item = _pending_locked(request_pk)
    now = db_now_ms()
    if req.requested_by_id == user.id:
        raise Forbidden("an approver may not decide their own takeover request")
    req.status = TakeoverRequest.Status.REJECTED
    req.decided_at_ms = now
    req.decided_by = user
    req.decision_note = note[:1000]
    req.save(update_fields=["status", "decided_at_ms", "decided_by", "decision_note"])
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action="takeover.reject",
        object_type="takeover_request",
        object_id=str(req.id),
        work_item=item,
        reason=note,
        before={"status": "pending"},
        after={"status": "rejected"},
        request_id=request_id,
    )
    return req


@transaction.atomic(durable=True)
def takeover_break_glass(
    *,
    work_key: str,
    user: Any,
    role: str,
    reason_category: str,
    reason_text: str,
    standing_ms: int | None = None,
    grantee_agent: str | None = None,
    request_id: str = "",
) -> Intervention:
    """Take over at once, without an approver; the intervention is flagged for review."""
    if not user.has_perm("takeovers.break_glass"):
        raise Forbidden("break-glass takeover needs the break_glass permission")
    now = db_now_ms()
    req = _request_locked(
        work_key=work_key,
        user=user,
        role=role,
        reason_category=reason_category,
        reason_text=reason_text,
        standing_ms=standing_ms,
        grantee_agent=grantee_agent,
        request_id=request_id,
        now=now,
        break_glass=True,
    )
    item = _item_locked(item_id=req.work_item_id)  # already ours; re-read for the grant
    now = db_now_ms()  # read after the locks, so the grant is dated after any wait
    return _approve_locked(
        req=req,
        item=item,
        user=user,
        role=role,
        note="break-glass",
        request_id=request_id,
        now=now,
    )


@transaction.atomic(durable=True)
def intervention_review(
    *, intervention_pk: int, user: Any, role: str, note: str, request_id: str = ""
) -> Intervention:
    """A manager reviews a break-glass intervention after the fact."""
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a review needs a note", param="note")
    iv = Intervention.objects.select_for_update(no_key=True).filter(id=intervention_pk).first()
    now = db_now_ms()
    if iv is None:
        raise NotFound(f"no intervention {intervention_pk}")
    if not iv.break_glass:
        raise ValidationFailed("only break-glass interventions need a review")
    if iv.reviewed_at_ms is not None:
        raise ValidationFailed("this intervention was already reviewed")
    if iv.approved_by_id == user.id:
        raise Forbidden("the person who broke the glass may not review it")
    iv.reviewed_at_ms, iv.reviewed_by, iv.review_note = now, user, note[:1000]
    iv.save(update_fields=["reviewed_at_ms", "reviewed_by", "review_note"])
    _event(iv, "reviewed", now, _name(user), note=note)
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action="intervention.review",
        object_type="intervention",
        object_id=str(iv.id),
        work_item=iv.work_item,
        reason=note,
        before={"reviewed": False},
        after={"reviewed": True},
        request_id=request_id,
    )
    return iv


# --- working under standing ----------------------------------------------------------------


def _intervention_locked(intervention_pk: int) -> tuple[Intervention, WorkItem]:
    peek = Intervention.objects.filter(id=intervention_pk).values("work_item_id").first()
    if peek is None:
        raise NotFound(f"no intervention {intervention_pk}")
    item = _item_locked(item_id=peek["work_item_id"])
    iv = (
        Intervention.objects.select_for_update(no_key=True, of=("self",))
        .select_related("grantee", "lease")
        .get(id=intervention_pk)
    )
    return iv, item


def _standing_locked(
    *, iv: Intervention, item: WorkItem, user: Any, lease_id: Any, epoch: int, now: int
) -> Lease:
    """Lock the human's standing lease and check it is exactly (lease id, epoch), live, and
    still the work item's current grant."""
    if iv.grantee.user_id != user.id:
        raise Forbidden("only the person granted this standing may act under it")
    lid = parse_lease_id(lease_id)
    if lid != iv.lease_id:
        raise StaleEpoch(
            "that is not this intervention's lease", current_epoch=item.epoch, your_epoch=epoch
        )
    lease = (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .select_related("holder")
        .get(id=lid)
    )
    if epoch != lease.epoch or item.epoch != lease.epoch:
        raise StaleEpoch(
            f"the work item is at epoch {item.epoch}", current_epoch=item.epoch, your_epoch=epoch
        )
    if lease.state not in LIVE_STATES:
        raise ENDED_STATE_ERRORS[lease.state](
            lease.end_reason or f"the standing is {lease.state}",
            current_epoch=item.epoch,
            your_epoch=epoch,
        )
    if lease_expire_if_due_locked(lease, now):
        raise LeaseExpired("the standing lapsed", current_epoch=item.epoch, your_epoch=epoch)
    return lease


def _audit_standing(
    *,
    user: Any,
    role: str,
    action: str,
    iv: Intervention,
    item: WorkItem,
    now: int,
    reason: str,
    before: dict[str, Any],
    after: dict[str, Any],
    request_id: str,
) -> None:
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action=action,
        object_type="intervention",
        object_id=str(iv.id),
        work_item=item,
        reason=reason,
        before=before,
        after=after,
        request_id=request_id,
    )


@transaction.atomic(durable=True)
def standing_extend(
    *,
    intervention_pk: int,
    user: Any,
    role: str,
    lease_id: Any,
    epoch: int,
    extend_ms: int,
    reason: str,
    request_id: str = "",
) -> Lease:
    """A new absolute expiry `now + extend_ms`, capped by the standing maximum. Same epoch."""
    reason = (reason or "").strip()
    if not reason:
        raise ValidationFailed("an extension needs a reason", param="reason")
    if not isinstance(extend_ms, int) or extend_ms < standing_min_ms():
        raise ValidationFailed("extend by at least a minute", param="extend_ms")
    iv, item = _intervention_locked(intervention_pk)
    now = db_now_ms()
    lease = _standing_locked(iv=iv, item=item, user=user, lease_id=lease_id, epoch=epoch, now=now)
    new_expiry = min(now + extend_ms, lease.max_expires_at_ms)
    if new_expiry <= lease.expires_at_ms:
        raise ValidationFailed(
            "the standing is already at its maximum; hand back, assign or complete",
            param="extend_ms",
        )
    before = {"expires_at_ms": lease.expires_at_ms, "epoch": lease.epoch}
    Lease.objects.filter(id=lease.id, epoch=lease.epoch).update(
        expires_at_ms=new_expiry, jeopardy_at_ms=new_expiry, due_at_ms=new_expiry
    )
    lease.expires_at_ms = lease.jeopardy_at_ms = lease.due_at_ms = new_expiry
    LeaseEvent.objects.create(
        lease=lease,
        work_item=item,
        epoch=lease.epoch,
        kind=LeaseEvent.Kind.EXTENDED,
        at_ms=now,
        actor=iv.grantee,
        detail={"reason": reason[:300], "expires_at_ms": new_expiry},
    )
    _event(
        iv,
        "extended",
        now,
        _name(user),
        reason=reason,
        expires_at_ms=new_expiry,
        capped=new_expiry == lease.max_expires_at_ms,
    )
    _audit_standing(
        user=user,
        role=role,
        action="standing.extend",
        iv=iv,
        item=item,
        now=now,
        reason=reason,
        before=before,
        after={"expires_at_ms": new_expiry, "epoch": lease.epoch},
        request_id=request_id,
    )
    return lease


@transaction.atomic(durable=True)
def standing_complete(
    *,
    intervention_pk: int,
    user: Any,
    role: str,
    lease_id: Any,
    epoch: int,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """Complete the work under human standing; refused while anything is unreconciled."""
    iv, item = _intervention_locked(intervention_pk)
    now = db_now_ms()
    lease = _standing_locked(iv=iv, item=item, user=user, lease_id=lease_id, epoch=epoch, now=now)
    lease.work_item = item
    work_complete_locked(
        lease=lease, executor=iv.grantee, now_ms=now, reason="completed under human standing"
    )
    iv.outcome, iv.ended_at_ms = Intervention.Outcome.COMPLETED, now
    iv.save(update_fields=["outcome", "ended_at_ms"])
    _event(iv, "completed", now, _name(user), note=note, epoch=lease.epoch)
    _audit_standing(
        user=user,
        role=role,
        action="standing.complete",
        iv=iv,
        item=item,
        now=now,
        reason=note,
        before={"status": "open", **_lease_view(lease)},
        after={"status": "completed"},
        request_id=request_id,
    )
    return iv


def _already(iv: Intervention, outcome: str, lease_id: Any, epoch: int) -> bool:
    """A retry of the end that already happened to exactly this (lease, epoch)."""
    try:
        lid = parse_lease_id(lease_id)
    except NotFound:
        return False
    return iv.outcome == outcome and iv.lease_id == lid and iv.epoch == epoch


@transaction.atomic(durable=True)
def standing_hand_back(
    *,
    intervention_pk: int,
    user: Any,
    role: str,
    lease_id: Any,
    epoch: int,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """Release the human lease to the agent pool: a compare-and-set on (lease id, epoch). A
    retried hand-back answers as done and never touches a newer grant."""
    iv, item = _intervention_locked(intervention_pk)
    now = db_now_ms()
    if _already(iv, Intervention.Outcome.HANDED_BACK, lease_id, epoch):
        return iv
    lease = _standing_locked(iv=iv, item=item, user=user, lease_id=lease_id, epoch=epoch, now=now)
    if item.queue.agent_acquire_needs_reconciliation and unreconciled_effects_exist(item):
        raise NeedsReconciliation(
            "reconcile every effect first: agents cannot take this work back while an "
            "outcome is unknown"
        )
    lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now,
        reason="handed back to the agent pool",
        actor=iv.grantee,
    )
    iv.outcome, iv.ended_at_ms = Intervention.Outcome.HANDED_BACK, now
    iv.save(update_fields=["outcome", "ended_at_ms"])
    _event(iv, "handed_back", now, _name(user), note=note, epoch=lease.epoch)
    _audit_standing(
        user=user,
        role=role,
        action="standing.hand_back",
        iv=iv,
        item=item,
        now=now,
        reason=note or "handed back to the agent pool",
        before=_lease_view(lease),
        after={"lease_id": None, "epoch": item.epoch, "next_grant": "agent pool"},
        request_id=request_id,
    )
    return iv


@transaction.atomic(durable=True)
def standing_assign(
    *,
    intervention_pk: int,
    user: Any,
    role: str,
    lease_id: Any,
    epoch: int,
    agent_name: str,
    note: str = "",
    request_id: str = "",
) -> Intervention:
    """End the human lease and grant the named agent a lease at a new epoch, in one
    transaction; a compare-and-set on (lease id, epoch) like hand-back."""
    iv, item = _intervention_locked(intervention_pk)
    now = db_now_ms()
    if _already(iv, Intervention.Outcome.ASSIGNED, lease_id, epoch):
        return iv
    agent = _agent_named(agent_name)
    lease = _standing_locked(iv=iv, item=item, user=user, lease_id=lease_id, epoch=epoch, now=now)
    lease_end_locked(
        lease=lease,
        state=Lease.State.RELEASED,
        now_ms=now,
        reason=f"assigned to {agent.name}",
        actor=iv.grantee,
    )
    successor = lease_grant_locked(
        item=item, holder=agent, now_ms=now, grant_kind=Lease.GrantKind.ASSIGN, actor=iv.grantee
    )
    iv.outcome, iv.ended_at_ms = Intervention.Outcome.ASSIGNED, now
    iv.successor_lease = successor
    iv.save(update_fields=["outcome", "ended_at_ms", "successor_lease"])
    _event(
        iv,
        "assigned",
        now,
        _name(user),
        note=note,
        agent=agent.name,
        lease_id=str(successor.id),
        epoch=successor.epoch,
    )
    _audit_standing(
        user=user,
        role=role,
        action="standing.assign",
        iv=iv,
        item=item,
        now=now,
        reason=note or f"assigned to {agent.name}",
        before=_lease_view(lease),
        after=_lease_view(successor),
        request_id=request_id,
    )
    return iv


@transaction.atomic(durable=True)
def effect_record_human(
    *,
    intervention_pk: int,
    user: Any,
    role: str,
    lease_id: Any,
    epoch: int,
    kind: str,
    target: str,
    outcome: str,
    detail: str = "",
    idempotency_key: str = "",
    request_id: str = "",
) -> Effect:
    """Record an effect the human performed themselves, under their standing's epoch."""
    kind, target = (kind or "").strip(), (target or "").strip()
    if not kind or len(kind) > 100:
        raise ValidationFailed("kind is 1 to 100 characters", param="kind")
    if not target or len(target) > 500:
        raise ValidationFailed("target is 1 to 500 characters", param="target")
    if outcome not in Effect.Outcome.values:
        raise ValidationFailed("outcome is applied, failed or unknown", param="outcome")
    iv, item = _intervention_locked(intervention_pk)
    now = db_now_ms()
    key = (idempotency_key or "").strip()[:200] or f"human:{iv.id}:{now}"
    first = Effect.objects.filter(executor=iv.grantee, idempotency_key=key).first()
    if first is not None:
        return first
    lease = _standing_locked(iv=iv, item=item, user=user, lease_id=lease_id, epoch=epoch, now=now)
    effect = Effect(
        work_item=item,
        lease=lease,
        executor=iv.grantee,
        source=Effect.Source.HUMAN,
        epoch=lease.epoch,
        current_epoch=item.epoch,
        kind=kind,
        target=target,
        idempotency_key=key,
        payload={},
        decision=Effect.Decision.AUTHORIZED,
        proposed_at_ms=now,
        decided_at_ms=now,
        decided_by=user,
        outcome=outcome,
        outcome_detail=(detail or "")[:1000],
        outcome_at_ms=now,
    )
    effect.fencing_token = fencing_token_issue(
        work_key=item.key,
        epoch=lease.epoch,
        lease_id=str(lease.id),
        holder=iv.grantee.name,
        now_ms=now,
        expires_at_ms=now + settings.FENCING_TOKEN_TTL_MS,
        effect_id=str(effect.id),
    )
    effect.save(force_insert=True)
    _event(
        iv,
        "effect_recorded",
        now,
        _name(user),
        effect_id=str(effect.id),
        effect_kind=kind,
        target=target,
        outcome=outcome,
        epoch=lease.epoch,
    )
    _audit_standing(
        user=user,
        role=role,
        action="effect.record",
        iv=iv,
        item=item,
        now=now,
        reason=detail,
        before={},
        after={
            "effect_id": str(effect.id),
            "kind": kind,
            "target": target,
            "outcome": outcome,
            "epoch": lease.epoch,
        },
        request_id=request_id,
    )
    return effect


def effect_reconcile_human(
    *, effect_id: Any, user: Any, role: str, resolution: str, note: str, request_id: str = ""
) -> Effect:
    """Reconcile as a human (confirmed, not applied, compensated); the core service audits.
    The intervention timeline reads reconciliations from the effect rows themselves."""
    return effect_reconcile(
        effect_id=effect_id,
        actor=human_executor_for(user),
        resolution=resolution,
        note=note,
        actor_user_id=user.id,
        actor_role=role,
        request_id=request_id,
    )


# --- commit-time approvals (require_approval effects) ----------------------------------------


def _pending_effect_locked(effect_id: Any) -> tuple[Effect, Lease | None, WorkItem]:
    try:
        eid = parse_lease_id(effect_id)
    except NotFound:
        raise NotFound(f"no effect {str(effect_id)[:60]!r}") from None
    peek = Effect.objects.filter(id=eid).values("work_item_id").first()
    if peek is None:
        raise NotFound(f"no effect {eid}")
    item = _item_locked(item_id=peek["work_item_id"])
    effect = (
        Effect.objects.select_for_update(no_key=True, of=("self",))
        .select_related("executor")
        .get(id=eid)
    )
    lease = (
        Lease.objects.select_for_update(no_key=True).filter(id=effect.lease_id).first()
        if effect.lease_id
        else None
    )
    if effect.decision != Effect.Decision.PENDING_APPROVAL:
        raise ValidationFailed(f"the effect is {effect.decision}, not waiting for approval")
    return effect, lease, item


@transaction.atomic(durable=True)
def _effect_approve(*, effect_id: Any, user: Any, role: str, note: str, request_id: str) -> Effect:
    effect, lease, item = _pending_effect_locked(effect_id)
    now = db_now_ms()
    if effect.executor and effect.executor.user_id == user.id:
        raise Forbidden("an approver may not approve their own effect")
    code, detail = "", ""
    if lease is None or effect.epoch != item.epoch or lease.epoch != item.epoch:
        code = "stale_epoch"
        detail = f"epoch {effect.epoch} is stale; the work item is at epoch {item.epoch}"
    elif lease.state not in LIVE_STATES:
        code = ENDED_STATE_ERRORS[lease.state].code
        detail = lease.end_reason or f"the lease is {lease.state}"
    elif lease_expire_if_due_locked(lease, now):
        code, detail = "lease_expired", "the lease's ttl elapsed before the approval"
    else:
        times = LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms)
        if state_at(times, now) is Certainty.JEOPARDY:
            # Not stale, only unsure: leave it waiting; the approver may try again.
            raise InJeopardy("the lease is in jeopardy; approve after it renews")
    effect.decided_at_ms, effect.decided_by = now, user
    effect.current_epoch = item.epoch
    if code:
        effect.decision = Effect.Decision.REFUSED
        effect.refusal_code, effect.refusal_detail = code, detail[:500]
    else:
        assert lease is not None
        effect.decision = Effect.Decision.AUTHORIZED
        effect.fencing_token = fencing_token_issue(
            work_key=item.key,
            epoch=lease.epoch,
            lease_id=str(lease.id),
            holder=effect.executor.name if effect.executor else "",
            now_ms=now,
            expires_at_ms=now + settings.FENCING_TOKEN_TTL_MS,
            effect_id=str(effect.id),
        )
    effect.save(
        update_fields=[
            "decision",
            "decided_at_ms",
            "decided_by",
            "current_epoch",
            "refusal_code",
            "refusal_detail",
            "fencing_token",
        ]
    )
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action="effect.approve" if not code else "effect.approve_refused",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        reason=note or detail,
        before={"decision": "pending_approval", "epoch": effect.epoch},
        after={"decision": effect.decision, "refusal_code": code, "current_epoch": item.epoch},
        request_id=request_id,
    )
    return effect


def effect_approve(
    *, effect_id: Any, user: Any, role: str, note: str = "", request_id: str = ""
) -> Effect:
    """Authorize a waiting effect only if its lease is still current and active; otherwise
    the refusal (with its stale code) is committed, then raised."""
    effect = _effect_approve(
        effect_id=effect_id, user=user, role=role, note=note, request_id=request_id
    )
    if effect.decision == Effect.Decision.REFUSED:
        raise effect_error(effect)
    return effect


@transaction.atomic(durable=True)
def effect_reject(
    *, effect_id: Any, user: Any, role: str, note: str, request_id: str = ""
) -> Effect:
    note = (note or "").strip()
    if not note:
        raise ValidationFailed("a rejection needs a note", param="note")
    effect, _lease, item = _pending_effect_locked(effect_id)
    now = db_now_ms()
    if effect.executor and effect.executor.user_id == user.id:
        raise Forbidden("an approver may not decide their own effect")
    effect.decision = Effect.Decision.REFUSED
    effect.refusal_code = "policy_denied"
    effect.refusal_detail = f"rejected by {_name(user)}: {note}"[:500]
    effect.decided_at_ms, effect.decided_by, effect.current_epoch = now, user, item.epoch
    effect.save(
        update_fields=[
            "decision",
            "refusal_code",
            "refusal_detail",
            "decided_at_ms",
            "decided_by",
            "current_epoch",
        ]
    )
    audit_record(
        at_ms=now,
        actor_user_id=user.id,
        actor_name=_name(user),
        actor_role=role,
        action="effect.reject",
        object_type="effect",
        object_id=str(effect.id),
        work_item=item,
        reason=note,
        before={"decision": "pending_approval"},
        after={"decision": "refused", "refusal_code": "policy_denied"},
        request_id=request_id,
    )
    return effect


# --- sweep step ----------------------------------------------------------------------------


def takeover_requests_expire_due(*, now_ms: int | None = None, batch: int = 500) -> int:
    """Expire undecided requests past their deadline (one alert each) and mark interventions
    whose standing lapsed. Batches skip rows another worker holds. Returns rows changed."""
    changed = 0
    while True:
        n = _expire_batch(batch=batch, now_ms=now_ms)
        changed += n
        if n < batch:
            break
    return changed + _lapsed_batch(batch=batch)


@transaction.atomic(durable=True)
def _expire_batch(*, batch: int, now_ms: int | None) -> int:
    now = db_now_ms() if now_ms is None else now_ms
    due = list(
        TakeoverRequest.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(status=TakeoverRequest.Status.PENDING, decide_by_ms__lte=now)
        .order_by("decide_by_ms")[:batch]
    )
    if not due:
        return 0
    ids = [r.id for r in due]
    # Compare-and-set: only rows still pending change.
    n = TakeoverRequest.objects.filter(id__in=ids, status="pending").update(
        status=TakeoverRequest.Status.EXPIRED,
        decided_at_ms=now,
        decision_note="expired undecided",
    )
    Alert.objects.bulk_create(
        [
            Alert(
                kind=Alert.Kind.TAKEOVER_EXPIRED,
                dedupe_key=f"takeover_expired:{r.id}",
                work_item_id=r.work_item_id,
                epoch=r.target_epoch,
                message=f"takeover request #{r.id} expired without a decision",
                detail={"takeover_request": r.id},
                due_at_ms=r.decide_by_ms,
                opened_at_ms=now,
            )
            for r in due
        ],
        ignore_conflicts=True,
    )
    return n


@transaction.atomic(durable=True)
def _lapsed_batch(*, batch: int) -> int:
    rows = list(
        Intervention.objects.select_for_update(skip_locked=True, no_key=True, of=("self",))
        .select_related("lease")
        .filter(outcome=Intervention.Outcome.OPEN)
        .exclude(lease__state__in=LIVE_STATES)[:batch]
    )
    for iv in rows:
        ended = iv.lease.ended_at_ms or iv.lease.expires_at_ms
        iv.outcome, iv.ended_at_ms = Intervention.Outcome.LAPSED, ended
        iv.save(update_fields=["outcome", "ended_at_ms"])
        _event(iv, "lapsed", ended, "sweep", lease_state=iv.lease.state, reason=iv.lease.end_reason)
    return len(rows)
