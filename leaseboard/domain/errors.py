"""Typed refusals, each with one stable machine-readable code (docs/design.md §12).

The API maps `code` to an HTTP status in one place (leaseboard/api/errors.py); the
dashboard shows `detail`. `decision` says which of the three decisions refused.
"""

from __future__ import annotations

from typing import Any

from leaseboard.domain.certainty import Certainty


class LeaseboardError(Exception):
    code = "validation_error"
    title = "Request refused"
    decision = "request"  # admission | lease | authorization | request

    def __init__(self, detail: str = "", **extra: Any) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title
        self.extra = extra


# deliberate: one class per refusal, alike in shape (code, title, decision) but each its
# own row of the error table: callers raise and catch them by name, the type checker sees
# each, and ERROR_CLASSES below lists them; a table built at run time would hide all three.
class ValidationFailed(LeaseboardError):
    code = "validation_error"
    title = "The request is not valid"


class NotFound(LeaseboardError):
    code = "not_found"
    title = "No such object"


class Unauthenticated(LeaseboardError):
    code = "unauthenticated"
    title = "Missing or invalid credentials"


class Forbidden(LeaseboardError):
    code = "forbidden"
    title = "Not allowed for this role"


class RateLimited(LeaseboardError):
    code = "rate_limited"
    title = "Too many requests"


class WorkNotAdmitted(LeaseboardError):
    code = "work_not_admitted"
    title = "The work item is not admitted"
    decision = "admission"


class CapacityExhausted(LeaseboardError):
    code = "capacity_exhausted"
    title = "The queue has no free capacity"
    decision = "admission"


class QueueNotAllowed(LeaseboardError):
    code = "queue_not_allowed"
    title = "This credential may not use the queue"
    decision = "admission"


class WorkLeased(LeaseboardError):
    code = "work_leased"
    title = "Another executor holds this work item"
    decision = "lease"


class LockDelay(LeaseboardError):
    code = "lock_delay"
    title = "The work item is fenced: the previous holder's tokens may still be accepted"
    decision = "lease"


class NeedsReconciliation(LeaseboardError):
    code = "needs_reconciliation"
    title = "Effects under an earlier lease must be reconciled first"
    decision = "lease"


class StaleEpoch(LeaseboardError):
    code = "stale_epoch"
    title = "The epoch is older than the work item's current epoch"
    decision = "lease"


class LeaseExpired(LeaseboardError):
    code = "lease_expired"
    title = "The lease has expired"
    decision = "lease"


class LeaseRevoked(LeaseboardError):
    code = "lease_revoked"
    title = "The lease was revoked"
    decision = "lease"


class LeaseReleased(LeaseboardError):
    code = "lease_released"
    title = "The lease was released"
    decision = "lease"


class NotHolder(LeaseboardError):
    code = "not_holder"
    title = "The caller does not hold this lease"
    decision = "lease"


class InJeopardy(LeaseboardError):
    code = "in_jeopardy"
    title = "The lease is in jeopardy: no new effects until it renews"
    decision = "authorization"


class PolicyDenied(LeaseboardError):
    code = "policy_denied"
    title = "The effect policy denies this effect"
    decision = "authorization"


class ApprovalRequired(LeaseboardError):
    code = "approval_required"
    title = "The effect waits for an approver"
    decision = "authorization"


class PayloadMismatch(LeaseboardError):
    code = "payload_mismatch"
    title = "The request is not the effect that was decided on"
    decision = "authorization"


class OnHold(LeaseboardError):
    code = "on_hold"
    title = "An operator put the work item on hold until the hold is released"
    decision = "authorization"


class AlreadyDecided(LeaseboardError):
    code = "already_decided"
    title = "The approval request was already decided; a decision is made once"
    decision = "authorization"


class ApprovalExpired(LeaseboardError):
    code = "approval_expired"
    title = "The approval request was not decided in time; its default decision applied"
    decision = "authorization"


class TakeoverConflict(LeaseboardError):
    code = "takeover_conflict"
    title = "The work item changed since the takeover was requested"
    decision = "lease"


class IdempotencyConflict(LeaseboardError):
    code = "idempotency_conflict"
    title = "The idempotency key was used for a different request"


class Unavailable(LeaseboardError):
    """503: a part Leaseboard needs (its database) is unreachable or too slow to answer;
    the request changed nothing and may be retried after Retry-After (docs/design.md §14)."""

    code = "unavailable"
    title = "Leaseboard cannot reach its database"


class InternalError(LeaseboardError):
    """500: an unexpected error, logged with the request id the answer carries."""

    code = "internal_error"
    title = "Internal error"


ERROR_CLASSES: tuple[type[LeaseboardError], ...] = (
    ValidationFailed,
    NotFound,
    Unauthenticated,
    Forbidden,
    RateLimited,
    WorkNotAdmitted,
    CapacityExhausted,
    QueueNotAllowed,
    WorkLeased,
    LockDelay,
    NeedsReconciliation,
    StaleEpoch,
    LeaseExpired,
    LeaseRevoked,
    LeaseReleased,
    NotHolder,
    InJeopardy,
    PolicyDenied,
    ApprovalRequired,
    PayloadMismatch,
    OnHold,
    AlreadyDecided,
    ApprovalExpired,
    TakeoverConflict,
    IdempotencyConflict,
    Unavailable,
    InternalError,
)
ERRORS_BY_CODE: dict[str, type[LeaseboardError]] = {cls.code: cls for cls in ERROR_CLASSES}
ALL_CODES = frozenset(ERRORS_BY_CODE)

# Terminal lease state -> the refusal a caller gets for acting under it.
ENDED_STATE_ERRORS: dict[str, type[LeaseboardError]] = {
    Certainty.EXPIRED: LeaseExpired,
    Certainty.RELEASED: LeaseReleased,
    Certainty.REVOKED: LeaseRevoked,
}
