"""The stored vocabulary that no richer domain module owns: who an executor is, how a lease
was granted, where a work item stands, which event an alert reports, and why a person
stepped in (the reason category of a takeover, a revoke or a quarantine).

Each enum here (and `Certainty`, the effect enums in `reconciliation`) is the one
definition of its values: model choices, check constraints and raw SQL literals are derived
from it (leaseboard.core.models.choices, leaseboard.core.sql). Adding a member changes the
schema: run makemigrations.
"""

from __future__ import annotations

from enum import StrEnum

from leaseboard.domain.errors import ValidationFailed


# deliberate: each enum below is the one definition of a stored vocabulary, declared member
# by member (the shape repeats, like the error table in leaseboard.domain.errors, because
# the values are data the schema is derived from).
class ExecutorKind(StrEnum):
    AGENT = "agent"
    HUMAN = "human"


class GrantKind(StrEnum):
    ACQUIRE = "acquire"
    TAKEOVER = "takeover"
    HANDBACK = "handback"
    ASSIGN = "assign"


class Admission(StrEnum):
    ADMITTED = "admitted"
    WAITING = "waiting"
    REJECTED = "rejected"


class WorkStatus(StrEnum):
    OPEN = "open"
    COMPLETED = "completed"


class NoticeStatus(StrEnum):
    """Delivery of a notice (an alert's, an approver's, an epoch advance) to one target:
    `failed` is a notice no longer owed (its target was removed from the configuration,
    its effect decided before it went out); `dead` is a dead letter: delivery was given up
    (the retries ran out, the target refused for good, the outbound policy refused it).
    Both are shown on the delivery log."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    DEAD = "dead"


class AlertKind(StrEnum):
    JEOPARDY = "jeopardy"
    EXPIRED = "expired"
    STANDING_LAPSED = "standing_lapsed"
    STALE_EFFECT = "stale_effect"
    RECIPIENT_REFUSAL = "recipient_refusal"
    RECOVERY = "recovery"
    TAKEOVER_EXPIRED = "takeover_expired"
    # A work item left with effects of no known outcome and nobody holding it: blocked until
    # a person takes it over and reconciles (docs/design.md §6). Opened once per lost holder.
    NEEDS_RECONCILIATION = "needs_reconciliation"


class ReasonCategory(StrEnum):
    """Why a person stepped in: a takeover, an operator revoke, a quarantine."""

    STUCK = "stuck"
    MISBEHAVING = "misbehaving"
    INCIDENT = "incident"
    CUSTOMER = "customer"
    UNKNOWN_OUTCOME = "unknown_outcome"
    OTHER = "other"


REASON_LABELS: dict[ReasonCategory, str] = {
    ReasonCategory.STUCK: "Agent stuck or looping",
    ReasonCategory.MISBEHAVING: "Agent misbehaving",
    ReasonCategory.INCIDENT: "Incident response",
    ReasonCategory.CUSTOMER: "Customer request",
    ReasonCategory.UNKNOWN_OUTCOME: "Effects with unknown outcome",
    ReasonCategory.OTHER: "Other",
}

REASON_TEXT_MAX = 1000


def reason_checked(category: str, text: str, *, what: str = "this") -> str:
    """A structured reason: a known category and 1 to REASON_TEXT_MAX characters of text
    (returned stripped). `what` names the act in the error ("a revocation")."""
    if category not in {c.value for c in ReasonCategory}:
        raise ValidationFailed("choose a reason category", param="reason_category")
    text = (text or "").strip()
    if not text:
        raise ValidationFailed(f"{what} needs a reason", param="reason_text")
    if len(text) > REASON_TEXT_MAX:
        raise ValidationFailed(
            f"the reason is at most {REASON_TEXT_MAX} characters", param="reason_text"
        )
    return text
