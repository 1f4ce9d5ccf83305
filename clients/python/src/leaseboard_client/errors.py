"""Typed SDK errors: every problem-details `code` of docs/design.md §12 becomes one exception class.

`LeaseLost` subclasses are authoritative (the lease is gone for good); `TransientError`
means "try again"; `LocalJeopardy` is the client's own conservative verdict.
"""

from __future__ import annotations

from typing import Any


class LeaseError(Exception):
    """A refusal or failure with a stable `code` (problem-details body kept in `problem`)."""

    code = "lease_error"

    def __init__(
        self,
        detail: str = "",
        *,
        code: str | None = None,
        status: int | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        if code is not None:
            self.code = code
        self.detail = detail or self.code
        self.status = status
        self.problem = problem or {}
        super().__init__(f"{self.code}: {self.detail}")

    @property
    def current_epoch(self) -> int | None:
        return self.problem.get("current_epoch")

    @property
    def your_epoch(self) -> int | None:
        return self.problem.get("your_epoch")

    @property
    def retry_after_s(self) -> float | None:
        """When to try again, where the server said (`lock_delay`, `rate_limited`)."""
        value = self.problem.get("retry_after_ms")
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return max(0.0, value / 1000)

    @property
    def lease_id(self) -> str | None:
        """The lease a refusal names: `work_leased` names the caller's own lease only."""
        value = self.problem.get("lease_id")
        return str(value) if value is not None else None

    @property
    def effect_id(self) -> str | None:
        """The effect a refusal is about (a refused or pending proposal is still recorded)."""
        value = self.problem.get("effect_id")
        return str(value) if value is not None else None


class TransientError(LeaseError):
    """Network failure, timeout or 5xx: the outcome is unknown, retrying may succeed."""

    code = "transient"


class RateLimited(TransientError):
    code = "rate_limited"


class Unavailable(TransientError):
    """503: Leaseboard could not reach its database in time and changed nothing (unless
    `reason` is `commit_unknown`). Uncertainty, never loss: a holding keeps its local
    deadline, goes to jeopardy if that passes, and resumes on the next renewal that is
    acknowledged."""

    code = "unavailable"

    @property
    def reason(self) -> str | None:
        value = self.problem.get("reason")
        return str(value) if value is not None else None


class CommitUnknown(Unavailable):
    """503 `unavailable` with reason `commit_unknown`: Leaseboard's deadline cut this
    request's COMMIT in flight (a database that stopped answering, or a synchronous standby
    that never acknowledged), so the change may or may not have been made. Neither a
    success nor a refusal, and not a plain retry either:

    - an acquire may have granted a lease whose token never arrived: never act on it.
      `Client.hold` asks again; if the answer is `work_leased` naming this agent's own
      lease, it releases that lease (nothing was done under it) and asks once more.
    - an effect proposal may be recorded, and authorized: its outcome is learned by
      proposing again with the same `idempotency_key` (kept here), which returns the first
      answer if there was one. `Holding.propose` (and `effect()`) does that once before
      raising this; the effect's body never runs on it.

    A renewal whose commit is unknown is uncertainty like any 503: the local deadline keeps
    running from the last acknowledged renewal."""

    def __init__(self, *args: Any, idempotency_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.idempotency_key = idempotency_key


# How long to wait before asking again after a commit of unknown outcome: a little past
# the server's Retry-After (its process answers 503 at once until then), within bounds.
UNKNOWN_PAUSE_S = (0.2, 2.0)


def unknown_pause(exc: LeaseError) -> float:
    low, high = UNKNOWN_PAUSE_S
    return min(high, max(low, (exc.retry_after_s or 0.0) + 0.1))


class InternalError(TransientError):
    """500: an unexpected server error, logged under `request_id`; the outcome of a write
    is unknown, as after a timeout."""

    code = "internal_error"

    @property
    def request_id(self) -> str | None:
        value = self.problem.get("request_id")
        return str(value) if value is not None else None


class LeaseLost(LeaseError):
    """Authoritative: the lease no longer gives standing; stop guarded work at once."""


class StaleEpoch(LeaseLost):
    code = "stale_epoch"


class LeaseRevoked(LeaseLost):
    code = "lease_revoked"


class LeaseReleased(LeaseLost):
    code = "lease_released"


class LeaseExpired(LeaseLost):
    code = "lease_expired"


class NotHolder(LeaseLost):
    code = "not_holder"


class LocalJeopardy(LeaseError):
    """The local deadline passed: the server may already consider the lease expired."""

    code = "local_jeopardy"


class InJeopardy(LeaseError):
    code = "in_jeopardy"


class WorkLeased(LeaseError):
    code = "work_leased"


class LockDelay(LeaseError):
    code = "lock_delay"


class NeedsReconciliation(LeaseError):
    code = "needs_reconciliation"


class WorkNotAdmitted(LeaseError):
    code = "work_not_admitted"


class CapacityExhausted(LeaseError):
    code = "capacity_exhausted"


class PolicyDenied(LeaseError):
    code = "policy_denied"


class ApprovalRequired(LeaseError):
    """The effect waits for an approver (202 pending_approval): it must not happen yet.
    Propose again with the same idempotency key to learn the decision."""

    code = "approval_required"


class OnHold(LeaseError):
    """An operator put the work item on hold: renewals continue, new effects (and new
    acquires, after a release) are refused until the hold is released or the work is taken
    over. Not terminal: quiesce, keep renewing. `reason` says why."""

    code = "on_hold"

    @property
    def reason(self) -> str | None:
        value = self.problem.get("reason")
        return str(value) if value is not None else None


class QueueNotAllowed(LeaseError):
    """This agent's credential may not use the queue (403): admitting to it, acquiring in
    it and proposing effects in it are refused. An admin names the queues it may use."""

    code = "queue_not_allowed"

    @property
    def queue(self) -> str | None:
        value = self.problem.get("queue")
        return str(value) if value is not None else None


class PayloadMismatch(LeaseError):
    code = "payload_mismatch"


class AlreadyDecided(LeaseError):
    """An approval request was decided already: a decision is made once."""

    code = "already_decided"


class ApprovalExpired(LeaseError):
    """Nobody decided in time; the rule's default decision applied."""

    code = "approval_expired"


class TakeoverConflict(LeaseError):
    code = "takeover_conflict"


class IdempotencyConflict(LeaseError):
    """The idempotency key was used for another effect (lease, kind, target or payload)."""

    code = "idempotency_conflict"


class NotFound(LeaseError):
    code = "not_found"


class ValidationError(LeaseError):
    code = "validation_error"


class Unauthenticated(LeaseError):
    code = "unauthenticated"


class Forbidden(LeaseError):
    code = "forbidden"


class ProtocolError(LeaseError):
    """The server answered something this SDK does not understand."""

    code = "protocol_error"


ERRORS_BY_CODE: dict[str, type[LeaseError]] = {
    cls.code: cls
    for cls in (
        RateLimited,
        Unavailable,
        InternalError,
        StaleEpoch,
        LeaseRevoked,
        LeaseReleased,
        LeaseExpired,
        NotHolder,
        InJeopardy,
        WorkLeased,
        LockDelay,
        NeedsReconciliation,
        WorkNotAdmitted,
        CapacityExhausted,
        PolicyDenied,
        ApprovalRequired,
        OnHold,
        QueueNotAllowed,
        PayloadMismatch,
        AlreadyDecided,
        ApprovalExpired,
        TakeoverConflict,
        IdempotencyConflict,
        NotFound,
        ValidationError,
        Unauthenticated,
        Forbidden,
    )
}

# The 503 `reason` that means a commit was cut in flight (its outcome is unknown).
COMMIT_UNKNOWN = "commit_unknown"

# Codes that end a holding at once (docs/design.md §11: stop guarded work on an
# authoritative answer).
TERMINAL_CODES = frozenset(
    {"lease_revoked", "stale_epoch", "not_holder", "lease_expired", "lease_released"}
)


def error_for(
    code: str | None, *, status: int | None, problem: dict[str, Any] | None
) -> LeaseError:
    """The typed exception for a code; 5xx without a known code is transient."""
    detail = str((problem or {}).get("detail") or (problem or {}).get("title") or "")
    cls = ERRORS_BY_CODE.get(code or "")
    if cls is Unavailable and (problem or {}).get("reason") == COMMIT_UNKNOWN:
        cls = CommitUnknown
    if cls is None:
        if status is not None and status >= 500:
            cls = TransientError
        else:
            return LeaseError(detail, code=code or f"http_{status}", status=status, problem=problem)
    return cls(detail, status=status, problem=problem)
