"""The sandbox's one write: attempt a payment under a fencing token.

Check and write are one transaction: the epoch mark, the ledger row and (after commit) the
refusal report. A payment retried with the same key returns the first acceptance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from leaseboard.sandbox.fence import verifier
from leaseboard.sandbox.models import Payment
from leaseboard_recipient import Decision, decide_from_headers


# deliberate: declared fields (frozen dataclasses), alike in shape only.
@dataclass(frozen=True)
class PaymentRequest:
    amount_cents: int
    currency: str
    payee: str
    idempotency_key: str = ""


@dataclass(frozen=True)
class Attempt:
    payment: Payment
    decision: Decision
    replayed: bool = False


@transaction.atomic(durable=True)
def payment_attempt(*, header: Callable[[str], str | None], request: PaymentRequest) -> Attempt:
    """Fence, then record the attempt; money 'moves' only when the fence accepted."""
    with connection.cursor() as cursor:
        decision = decide_from_headers(verifier(), header, cursor=cursor)
    claims = decision.claims
    common: dict[str, Any] = {
        "work_key": (decision.work_key or "")[:200],
        "epoch": decision.epoch,
        "high_water": decision.high_water,
        "holder": claims.holder[:150] if claims else "",
        "effect_id": (claims.effect_id or "")[:64] if claims else "",
        "amount_cents": request.amount_cents,
        "currency": request.currency,
        "payee": request.payee,
    }
    if not decision.accepted:
        payment = Payment.objects.create(
            status=Payment.Status.REFUSED,
            refusal_code=decision.code or "malformed",
            detail=decision.detail[:500],
            **common,
        )
        return Attempt(payment=payment, decision=decision)
    key = (request.idempotency_key or common["effect_id"])[:200]
    if key:
        first = Payment.objects.filter(status=Payment.Status.ACCEPTED, payment_key=key).first()
        if first is not None:
            return Attempt(payment=first, decision=decision, replayed=True)
    try:
        with transaction.atomic():
            payment = Payment.objects.create(
                status=Payment.Status.ACCEPTED, payment_key=key, **common
            )
    except IntegrityError:
        # A concurrent retry of the same payment committed first (PostgreSQL only).
        first = Payment.objects.get(status=Payment.Status.ACCEPTED, payment_key=key)
        return Attempt(payment=first, decision=decision, replayed=True)
    return Attempt(payment=payment, decision=decision)
