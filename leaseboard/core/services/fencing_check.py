"""The online fencing check (Chubby's CheckSequencer, docs/design.md §5 and §13): a recipient about
to do something irreversible asks whether the standing a token proves is still current
right now, instead of trusting the offline verification alone.

Read-only: it takes no lock and writes nothing; the answer is true at the database clock's
"now" and may change the instant after, which is why the recipient's own epoch guard, in
its own transaction, still runs. One exception: given the request it is about to execute
(its content digest, or kind, target and payload), a mismatch with what the token was
decided on is refused as `payload_mismatch` and recorded as the recipient's refusal, as
if it had filed the report itself: someone tried to stretch a decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, Subquery

from leaseboard.core.authority import Actor, authorize, certainty_of
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, WorkItem
from leaseboard.core.services.fencing import fencing_public_keys
from leaseboard.core.services.recipients import recipient_report_record
from leaseboard.core.tracing import Decision, decided
from leaseboard.domain.authority import ENDED_CODES, Act
from leaseboard.domain.certainty import LIVE
from leaseboard.domain.fencing import FencingClaims, InvalidToken, unverified_claims, verify_token
from leaseboard_recipient.tokens import fencing_order_text


@dataclass(frozen=True)
class FencingAnswer:
    valid: bool
    current_epoch: int | None
    code: str | None = None  # why not valid: a token code, stale_epoch, lease_*, not_found
    work_key: str | None = None
    epoch: int | None = None
    effect_id: str | None = None
    certainty: str | None = None  # of the lease the token names: active or jeopardy if valid
    expires_in_ms: int | None = None  # of the token
    detail: str | None = None  # why not, in words (a token refusal's detail)
    # The work item's queue, and the policy version the token's effect was decided under
    # (None for a lease token): what a recipient needs to accept a kind only from a queue.
    queue: str | None = None
    policy_version: int | None = None
    # The fencing order is (generation, epoch) (docs/design.md §5): the token's generation
    # and the current lease's (the generation of the primary that granted it).
    generation: int | None = None
    current_generation: int | None = None


def _current_generation() -> Subquery:
    """The generation of the lease at the work item's current epoch (0 before any grant)."""
    return Subquery(
        Lease.objects.filter(work_item=OuterRef("pk"), epoch=OuterRef("epoch")).values(
            "generation"
        )[:1]
    )


def _checked(span: Decision, answer: FencingAnswer) -> None:
    span.note(
        decision="valid" if answer.valid else "refused",
        code=answer.code,
        work_key=answer.work_key,
        epoch=answer.epoch,
        current_epoch=answer.current_epoch,
        effect_id=answer.effect_id,
    )


@decided("leaseboard.fencing.check", result=_checked)
def fencing_check(
    *, actor: Actor, token: str, digest: str | None = None, queue: str | None = None
) -> FencingAnswer:
    """`digest`: content_digest() of the request the recipient is about to execute, or None
    when it does not say (then only standing is checked). `queue`: the queue the recipient
    accepts this effect from (refused `wrong_queue` if it was decided in another)."""
    authorize(Act.CHECK_FENCING, actor)
    now = db_now_ms()
    try:
        claims = verify_token(
            token, public_keys=fencing_public_keys(), now_ms=now, queue=queue, work_key=None
        )
        if digest is not None and claims.digest != digest:
            raise InvalidToken(
                "payload_mismatch",
                (
                    f"the request ({digest}) is not what the token was decided on "
                    f"({claims.digest or 'no content bound'}); a changed effect is a new "
                    "proposal"
                ),
            )
    except InvalidToken as exc:
        return _refused(actor, token, exc)
    return _standing(claims, now)


def _refused(actor: Actor, token: str, exc: InvalidToken) -> FencingAnswer:
    """A token that does not verify (or does not match the request): the refusal, with the
    current epoch of the work it claims to name unless it is forged; a payload mismatch is
    recorded as the recipient's report."""
    said = unverified_claims(token)
    current: int | None = None
    current_generation: int | None = None
    if said is not None and exc.code != "forged":
        row = (
            WorkItem.objects.filter(key=said.work_key)
            .values_list("epoch", _current_generation())
            .first()
        )
        if row is not None:
            current, current_generation = row[0], row[1] or 0
    if exc.code == "payload_mismatch" and said is not None and current is not None:
        # deliberate: keyword arguments named one a line; alike in shape only, the values differ.
        recipient_report_record(
            actor=actor,
            work_key=said.work_key,
            reason="payload_mismatch",
            epoch=said.epoch,
            high_water=current,
            detail=f"online check: {exc.detail}",
            token=token,
        )
    return FencingAnswer(
        valid=False,
        current_epoch=current,
        code=exc.code,
        work_key=said.work_key if said else None,
        epoch=said.epoch if said else None,
        detail=exc.detail,
        generation=said.generation if said else None,
        current_generation=current_generation,
    )


def _standing(claims: FencingClaims, now: int) -> FencingAnswer:
    """A verified token: is the standing it proves still current, by the whole fencing
    order and the lease itself, and is that lease live?"""
    item = (
        WorkItem.objects.filter(key=claims.work_key)
        .select_related("queue")
        .only("id", "epoch", "queue__name")
        .first()
    )
    common: dict[str, Any] = {
        "work_key": claims.work_key,
        "epoch": claims.epoch,
        "generation": claims.generation,
        "effect_id": claims.effect_id,
        "expires_in_ms": claims.expires_at_ms - now,
    }
    if item is None:
        return FencingAnswer(valid=False, current_epoch=None, code="not_found", **common)
    common["queue"] = item.queue.name
    if claims.effect_id is not None:
        # As recorded (a token from before tokens named it says it here all the same).
        common["policy_version"] = (
            Effect.objects.filter(id=claims.effect_id).values_list("policy_version", flat=True)
        ).first()
    lease = Lease.objects.filter(work_item=item, epoch=item.epoch).first()
    common["current_generation"] = lease.generation if lease is not None else 0
    # The whole order, and the lease itself: after a failover, a grant the old primary made
    # and lost can name the same epoch as the new primary's grant (docs/design.md §5).
    if (claims.generation, claims.epoch) != (common["current_generation"], item.epoch) or (
        lease is not None and str(lease.id) != claims.lease_id
    ):
        return FencingAnswer(
            valid=False,
            current_epoch=item.epoch,
            code="stale_epoch",
            detail=(
                f"the token's {fencing_order_text(claims.generation, claims.epoch)} is not "
                f"the current {fencing_order_text(common['current_generation'], item.epoch)}"
            ),
            **common,
        )
    certainty = certainty_of(lease, now)
    if certainty not in LIVE:
        code = ENDED_CODES.get(certainty, "not_found") if certainty is not None else "not_found"
        return FencingAnswer(
            valid=False,
            current_epoch=item.epoch,
            code=code,
            certainty=certainty.value if certainty else None,
            **common,
        )
    assert certainty is not None
    return FencingAnswer(valid=True, current_epoch=item.epoch, certainty=certainty.value, **common)
