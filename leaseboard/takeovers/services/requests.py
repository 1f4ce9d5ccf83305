"""Asking to take work over: one request, or one reason for many work items (bulk)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NotRequired, TypedDict, Unpack

from django.db import IntegrityError, transaction

from leaseboard.core.authority import Actor, audit_role, authorize, authorize_who
from leaseboard.core.clock import db_now_ms
from leaseboard.core.locking import work_item_locked_by
from leaseboard.core.models import Executor, Lease, WorkItem
from leaseboard.core.services.executors import human_executor_for_user_id
from leaseboard.core.services.holds import lease_hold_locked, work_hold_lift_locked
from leaseboard.core.services.leases import lease_expire_if_due_locked, live_lease_locked
from leaseboard.domain.authority import Act
from leaseboard.domain.errors import LeaseboardError, ValidationFailed
from leaseboard.takeovers.models import BulkTakeover, TakeoverRequest
from leaseboard.takeovers.services._common import (
    agent_named,
    audited,
    decision_ttl_ms,
    lease_view,
    operator_named,
    reason_checked,
    standing_checked,
)

BULK_MAX_ITEMS = 200


# deliberate: declared fields, alike in shape with other per-item outcomes only.
@dataclass(frozen=True)
class BulkOutcome:
    work_key: str
    ok: bool
    request_id: int | None = None
    code: str | None = None
    detail: str = ""


class TakeoverAsk(TypedDict):
    """What asking to take a work item over says: the keyword arguments of
    `takeover_request` and of `takeover_break_glass` (no standing: the default; no agent:
    standing goes to the requester)."""

    work_key: str
    actor: Actor
    reason_category: str
    reason_text: str
    standing_ms: NotRequired[int | None]
    grantee_agent: NotRequired[str | None]
    # Standing to another operator (a username) instead of the requester.
    grantee_operator: NotRequired[str | None]
    # Put the work item on hold through the live lease while the request waits (the
    # agent keeps renewing; its new effects are refused `on_hold`); an approval lifts it.
    hold_while_waiting: NotRequired[bool]
    request_id: NotRequired[str]


def _target_locked(
    act: Act, actor: Actor, work_key: str, now: int
) -> tuple[WorkItem, Lease | None]:
    """The open work item to take over, locked, and its live lease (None if it ended by
    time)."""
    item = work_item_locked_by(key=work_key)
    authorize(act, actor, work_item_id=item.pk)  # in the work item's queue
    if item.status != WorkItem.Status.OPEN:
        raise ValidationFailed(f"work item {work_key!r} is {item.status}")
    live = live_lease_locked(item)
    if live is not None and lease_expire_if_due_locked(live, now):
        live = None
    return item, live


def _grantee(actor: Actor, agent: str | None, operator: str | None) -> Executor:
    """Who gets standing: the named agent, the named operator, or else the requester."""
    if agent and operator:
        raise ValidationFailed("give standing to an agent or to an operator, not both")
    if agent:
        return agent_named(agent)
    if operator:
        return operator_named(operator)
    return human_executor_for_user_id(actor.user_id)


def _recorded(req: TakeoverRequest, work_key: str) -> TakeoverRequest:
    """Save the request; one already waiting on the item (its unique constraint) refuses it."""
    try:
        with transaction.atomic():
            req.save(force_insert=True)
    except IntegrityError:
        raise ValidationFailed(
            f"a takeover of {work_key!r} is already waiting for a decision"
        ) from None
    return req


def _hold_while_waiting(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    live: Lease | None,
    actor: Actor,
    now: int,
    request_id: str,
) -> None:
    """Hold the work item through its live lease while the request waits (unless a hold is
    on it already)."""
    if live is None:
        raise ValidationFailed(
            "there is no live lease to hold while the request waits", param="hold"
        )
    if item.held_at_ms is None:
        lease_hold_locked(
            item=item,
            lease=live,
            actor=actor,
            now_ms=now,
            reason_category=req.reason_category,
            reason_text=f"{_hold_marker(req.id)} {req.reason_text}"[:1000],
            request_id=request_id,
        )


def request_locked(
    *,
    now: int,
    bulk: BulkTakeover | None = None,
    break_glass: bool = False,
    **ask: Unpack[TakeoverAsk],
) -> TakeoverRequest:
    """Record a request in the caller's transaction (a break-glass is a request decided at
    once). Standing goes to the requester unless an agent is named."""
    unexpected = set(ask) - set(TakeoverAsk.__annotations__)
    if unexpected:  # as a plain signature would (typed callers never get here)
        raise TypeError(f"unexpected keyword arguments: {sorted(unexpected)}")
    work_key, actor, request_id = ask["work_key"], ask["actor"], ask.get("request_id", "")
    act = Act.BREAK_GLASS if break_glass else Act.REQUEST_TAKEOVER
    authorize_who(act, actor)
    text = reason_checked(ask["reason_category"], ask["reason_text"])
    standing = standing_checked(ask.get("standing_ms"))
    item, live = _target_locked(act, actor, work_key, now)
    grantee = _grantee(actor, ask.get("grantee_agent"), ask.get("grantee_operator"))
    if live is not None and live.holder_id == grantee.id:
        raise ValidationFailed(f"{grantee.name} already holds this work item")
    req = _recorded(
        TakeoverRequest(
            work_item=item,
            target_lease=live,
            target_epoch=item.epoch,
            target_holder=live.holder if live else None,
            requested_by_id=actor.human_user_id,
            requester_role=audit_role(act, actor),
            grantee=grantee,
            reason_category=ask["reason_category"],
            reason_text=text,
            standing_ms=standing,
            break_glass=break_glass,
            bulk=bulk,
            requested_at_ms=now,
            decide_by_ms=now + decision_ttl_ms(),
            request_id=request_id[:64],
        ),
        work_key,
    )
    audited(
        act=act,
        actor=actor,
        action="takeover.break_glass" if break_glass else "takeover.request",
        obj=req,
        item=item,
        now=now,
        reason=f"{req.reason_category}: {text}",
        before=lease_view(live),
        after={"grantee": grantee.name, "standing_ms": standing, "target_epoch": item.epoch},
        request_id=request_id,
    )
    if ask.get("hold_while_waiting", False) and not break_glass:
        _hold_while_waiting(
            req=req, item=item, live=live, actor=actor, now=now, request_id=request_id
        )
    return req


def _hold_marker(request_pk: int | None) -> str:
    return f"while takeover #{request_pk} waits:"


def hold_placed_by(req: TakeoverRequest, item: WorkItem) -> bool:
    """Whether the work item's hold now is the one this request placed ("hold the agent
    while this waits"): put on when it was asked, by its requester, naming it. A hold an
    operator placed separately (before the request, or after releasing this one) is not."""
    return (
        item.held_at_ms == req.requested_at_ms
        and item.held_by_id == req.requested_by_id
        and _hold_marker(req.id) in item.hold_reason
    )


def request_hold_lift_locked(
    *,
    req: TakeoverRequest,
    item: WorkItem,
    act: Act,
    actor: Actor | None,
    now: int,
    request_id: str = "",
) -> bool:
    """A request that ends without an approval (rejected, expired, refused as stale) takes
    the hold it placed with it: the hold was "while this waits", and nothing waits any
    more. A hold placed separately stays. The caller holds the work item's lock; no actor:
    the sweep. True if a hold was lifted (and audited)."""
    if not hold_placed_by(req, item):
        return False
    why = f"takeover #{req.id} {req.status}: the hold it placed while it waited goes with it"
    work_hold_lift_locked(
        item=item, act=act, actor=actor, now_ms=now, why=why, request_id=request_id
    )
    return True


@transaction.atomic(durable=True)
def takeover_request(**ask: Unpack[TakeoverAsk]) -> TakeoverRequest:
    """Ask to take over a work item; an approver decides."""
    return request_locked(now=db_now_ms(), **ask)


def _bulk_keys(work_keys: list[str]) -> list[str]:
    """The asked work keys, each once, in order; between 1 and BULK_MAX_ITEMS of them."""
    keys = list(dict.fromkeys(k.strip() for k in work_keys if k and k.strip()))
    if not keys:
        raise ValidationFailed("select at least one work item", param="work_keys")
    if len(keys) > BULK_MAX_ITEMS:
        raise ValidationFailed(f"at most {BULK_MAX_ITEMS} work items per bulk request")
    return keys


def _bulk_outcomes(
    bulk: BulkTakeover,
    keys: list[str],
    *,
    actor: Actor,
    standing_ms: int | None,
    request_id: str,
    now: int,
) -> list[dict[str, Any]]:
    """One request per work key, each in a savepoint: a refusal undoes only its own."""
    results: list[dict[str, Any]] = []
    for work_key in keys:
        try:
            with transaction.atomic():
                # deliberate: keyword arguments one a line; alike in shape only.
                req = request_locked(
                    work_key=work_key,
                    actor=actor,
                    reason_category=bulk.reason_category,
                    reason_text=bulk.reason_text,
                    standing_ms=standing_ms,
                    grantee_agent=None,
                    request_id=request_id,
                    now=now,
                    bulk=bulk,
                )
            results.append(asdict(BulkOutcome(work_key, True, request_id=req.id)))
        except LeaseboardError as exc:
            results.append(asdict(BulkOutcome(work_key, False, code=exc.code, detail=exc.detail)))
    return results


# deliberate: a keyword-only signature, alike in shape with other services' only.
@transaction.atomic(durable=True)
def takeover_bulk_request(
    *,
    work_keys: list[str],
    actor: Actor,
    reason_category: str,
    reason_text: str,
    idempotency_key: str,
    standing_ms: int | None = None,
    request_id: str = "",
) -> BulkTakeover:
    """One reason for many work items; per-item outcomes. A repeated idempotency key
    answers with the first bulk's outcomes and requests nothing new."""
    authorize_who(Act.REQUEST_TAKEOVER, actor)  # each item is then decided in its queue
    key = (idempotency_key or "").strip()
    if not key or len(key) > 200:
        raise ValidationFailed("an idempotency key of 1 to 200 characters is required")
    first = BulkTakeover.objects.filter(requested_by_id=actor.user_id, idempotency_key=key).first()
    if first is not None:
        return first
    text = reason_checked(reason_category, reason_text)
    standing_checked(standing_ms)
    keys = _bulk_keys(work_keys)
    now = db_now_ms()
    bulk = BulkTakeover(
        requested_by_id=actor.human_user_id,
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
        return BulkTakeover.objects.get(requested_by_id=actor.user_id, idempotency_key=key)
    bulk.results = _bulk_outcomes(
        bulk, keys, actor=actor, standing_ms=standing_ms, request_id=request_id, now=now
    )
    bulk.save(update_fields=["results"])
    return bulk
