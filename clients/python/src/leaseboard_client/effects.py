"""Effects as context managers: propose on entry, act with the effect's token, report on exit.

    with holding.effect("payment.refund", target="invoice-7", idempotency_key=k) as fx:
        payments.post("/refunds", headers=fx.headers(), json=...)

Entry proposes the effect (refused at once, before any request, without standing) and
enters only if it was authorized. The body attaches `fx.headers()` to the recipient call.
Exit reports the outcome: applied on a normal exit, failed on an exception that shows the
effect did not happen, unknown on cancellation, a timeout or a network failure after the
request may have left (what the server needs to ask a human to reconcile it).
`fx.set_outcome(...)` overrides the guess. The async form is in `leaseboard_client.aio`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import httpx

from leaseboard_client.errors import (
    ApprovalRequired,
    LeaseError,
    LocalJeopardy,
    TransientError,
)
from leaseboard_client.protocol import OUTCOMES, EffectDecision

if TYPE_CHECKING:
    from leaseboard_client.holding import Holding
    from leaseboard_client.standing import Standing

log = logging.getLogger("leaseboard_client")

REPORT_BACKOFF_S = (0.1, 0.4)  # waits between the three attempts to report an outcome
APPROVAL_POLL_S = 1.0  # how often a proposal waiting for an approver asks again


def outcome_of(exc: BaseException | None) -> tuple[str, str]:
    """The outcome an effect's body implies by how it ended, and a detail for humans."""
    if exc is None:
        return "applied", ""
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit | GeneratorExit):
        return "unknown", f"cancelled ({type(exc).__name__}) while the effect was under way"
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return "failed", f"the request never reached its recipient: {exc!r}"[:1000]
    if isinstance(exc, TimeoutError | httpx.TimeoutException | httpx.TransportError):
        return "unknown", f"the recipient may or may not have acted: {exc!r}"[:1000]
    if isinstance(exc, TransientError):
        return "unknown", f"interrupted by a transient failure: {exc}"[:1000]
    return "failed", f"{type(exc).__name__}: {exc}"[:1000]


class Effect:
    """One effect under a holding: its decision, its token, and the outcome to report.

    `headers()` refuses (LocalJeopardy or the lease's loss) once standing is uncertain, and
    once the token may have died: a token dies with the lease as it stood at issue, so its
    local bound is the holding's deadline when the proposal was sent (a later renewal does
    not stretch it).
    """

    def __init__(
        self,
        holding: Standing,
        kind: str,
        target: str,
        *,
        idempotency_key: str | None = None,
        payload: Any = None,
        approval_wait_s: float = 0.0,
        approval_poll_s: float = APPROVAL_POLL_S,
    ) -> None:
        if approval_wait_s < 0 or approval_poll_s <= 0:
            raise ValueError("approval_wait_s must be >= 0 and approval_poll_s > 0")
        self.holding = holding
        self.approval_wait_s = approval_wait_s
        self.approval_poll_s = approval_poll_s
        self.kind = kind
        self.target = target
        self.idempotency_key = idempotency_key
        self.payload = payload
        self.decision: EffectDecision | None = None
        self.token_deadline: float | None = None
        self.outcome: str | None = None  # once reported (or given up on)
        self.detail = ""
        self.reported = False
        self.report_error: LeaseError | None = None
        self._chosen: tuple[str, str] | None = None

    @property
    def effect_id(self) -> str | None:
        return self.decision.effect_id if self.decision else None

    @property
    def fencing_token(self) -> str | None:
        return self.decision.fencing_token if self.decision else None

    def headers(self) -> dict[str, str]:
        """X-Lease-Epoch, X-Work-Key and the effect's X-Fencing-Token for the recipient."""
        if self.decision is None or not self.decision.authorized:
            raise RuntimeError("headers() belongs inside `with holding.effect(...) as fx:`")
        self.holding.ensure()
        if self.token_deadline is not None and self.holding.clock() >= self.token_deadline:
            raise LocalJeopardy(
                f"the token of effect {self.effect_id} may have expired with the lease it was "
                "issued under (a renewal does not stretch it): propose the effect again"
            )
        return self.holding._headers(self.fencing_token)

    def set_outcome(self, outcome: str, detail: str = "") -> None:
        """Say how it went (applied, failed, unknown); reported on exit in place of a guess."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
        self._chosen = (outcome, detail)

    # -- the steps both context managers take ------------------------------------------------

    def _proposing(self) -> None:
        # Refuse locally, before any request, without standing or while on hold.
        self.holding.ensure_may_propose()
        self.token_deadline = self.holding.deadline

    def _decided(self, decision: EffectDecision) -> None:
        self.decision = decision
        self.idempotency_key = decision.idempotency_key
        if not decision.authorized:
            raise ApprovalRequired(
                f"effect {decision.effect_id} ({self.kind} on {self.target}) waits for an "
                "approver; propose it again with the same idempotency_key to learn the decision",
                problem={
                    "effect_id": decision.effect_id,
                    "decision": decision.decision,
                    **({"rule": decision.rule} if decision.rule else {}),
                },
            )

    def _waiting(self, decision: EffectDecision, until: float, sent: float) -> float | None:
        """While an approver decides, how long to sleep before asking again (None: stop
        waiting). The holding's renewer keeps the lease meanwhile, so the approval stays
        decidable; a lost or uncertain standing ends the wait (ensure raises). `sent` is the
        local deadline when this poll went out: it answered "pending", so an approval comes
        later and its token dies with the lease as it stood then, no earlier than `sent`:
        the token's local bound."""
        if decision.authorized:
            return None
        now = self.holding.clock()
        if now >= until:
            return None
        self.holding.ensure()
        self.token_deadline = sent
        self.idempotency_key = decision.idempotency_key
        return min(self.approval_poll_s, until - now)

    def _final(self, exc: BaseException | None) -> tuple[str, str]:
        return self._chosen if self._chosen is not None else outcome_of(exc)

    def _reported(self, outcome: str, detail: str, error: LeaseError | None) -> None:
        self.outcome, self.detail = outcome, detail
        self.reported = error is None
        self.report_error = error
        if error is not None:
            # The effect stays without an outcome: a human reconciles it once the lease ends.
            log.warning(
                "could not report %s for effect %s (%s on %s): %s",
                outcome,
                self.effect_id,
                self.kind,
                self.target,
                error,
            )


class EffectScope(Effect):
    """The sync context manager (`Holding.effect(...)`)."""

    holding: Holding

    def __enter__(self) -> EffectScope:
        self._proposing()
        until = self.holding.clock() + self.approval_wait_s
        while True:
            sent = self.holding.deadline
            decision = self.holding.propose(
                self.kind,
                self.target,
                idempotency_key=self.idempotency_key,
                payload=self.payload,
            )
            pause = self._waiting(decision, until, sent)
            if pause is None:
                break
            time.sleep(pause)
        self._decided(decision)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        outcome, detail = self._final(exc)
        error: LeaseError | None = None
        for wait in (*REPORT_BACKOFF_S, None):
            try:
                self.holding.client.report_outcome(self.effect_id or "", outcome, detail or None)
                error = None
                break
            except TransientError as failure:
                error = failure
                if wait is not None:
                    time.sleep(wait)
            except LeaseError as failure:
                error = failure
                break
        self._reported(outcome, detail, error)
