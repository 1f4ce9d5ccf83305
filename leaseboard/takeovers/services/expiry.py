"""The takeover sweep step: undecided requests expire (one alert each) and interventions
whose standing lapsed are closed. Batches skip rows another worker holds; each batch is
its own transaction."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Alert
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import alerts_open
from leaseboard.domain.authority import Act
from leaseboard.takeovers.models import Intervention, TakeoverRequest
from leaseboard.takeovers.services._common import decision_ttl_ms, locked, timeline
from leaseboard.takeovers.services.requests import request_hold_lift_locked


def takeover_requests_expire_due(*, now_ms: int | None = None, batch: int = 500) -> int:
    """Expire undecided requests past their deadline and mark interventions whose standing
    lapsed. Returns rows changed."""
    changed = 0
    while True:
        n = _expire_batch(batch=batch, now_ms=now_ms)
        changed += n
        if n < batch:
            break
    _expired_holds_lift(batch=batch)  # a kill in between: the next sweep finishes it
    return changed + _lapsed_batch(batch=batch)


# Expired requests this recent are looked at for the hold they placed (index
# takeover_requested_idx): a sweep that died after expiring them is finished by the next.
HOLD_LIFT_LOOKBACK_MS = 3_600_000


def _expired_holds_lift(*, batch: int) -> int:
    """Lift the holds that expired requests placed while they waited, each with its work
    item's lock first (the core's lock order) in its own transaction."""
    since = db_now_ms() - decision_ttl_ms() - HOLD_LIFT_LOOKBACK_MS
    due = list(
        TakeoverRequest.objects.filter(
            status=TakeoverRequest.Status.EXPIRED,
            requested_at_ms__gte=since,
            work_item__held_at_ms=F("requested_at_ms"),
            work_item__held_by_id=F("requested_by_id"),
        ).values_list("id", flat=True)[:batch]
    )
    return sum(_expired_hold_lift(pk) for pk in due)


@transaction.atomic(durable=True)
def _expired_hold_lift(request_pk: int) -> bool:
    req, item = locked(TakeoverRequest, request_pk, what="takeover request")
    if req.status != TakeoverRequest.Status.EXPIRED:
        return False
    return request_hold_lift_locked(
        req=req, item=item, act=Act.REQUEST_TAKEOVER, actor=None, now=db_now_ms()
    )


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
    n = TakeoverRequest.objects.filter(id__in=ids, status=TakeoverRequest.Status.PENDING).update(
        status=TakeoverRequest.Status.EXPIRED,
        decided_at_ms=now,
        decision_note="expired undecided",
    )
    # deliberate: an Alert named field by field, as every alert its kind opens (alerts_open).
    alerts_open(
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
        ]
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
        timeline(
            iv, "lapsed", ended, "sweep", lease_state=iv.lease.state, reason=iv.lease.end_reason
        )
    return len(rows)
