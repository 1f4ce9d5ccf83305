"""The stored vocabulary that no richer domain module owns: who an executor is, how a lease
was granted, where a work item stands, which event an alert reports.

Each enum here (and `Certainty`, the effect enums in `reconciliation`) is the one
definition of its values: model choices, check constraints and raw SQL literals are derived
from it (leaseboard.core.models.choices, leaseboard.core.sql). Adding a member changes the
schema: run makemigrations.
"""

from __future__ import annotations

from enum import StrEnum


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
    """Delivery of an epoch-advance notice to a recipient's webhook."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class AlertKind(StrEnum):
    JEOPARDY = "jeopardy"
    EXPIRED = "expired"
    STANDING_LAPSED = "standing_lapsed"
    STALE_EFFECT = "stale_effect"
    RECIPIENT_REFUSAL = "recipient_refusal"
    RECOVERY = "recovery"
    TAKEOVER_EXPIRED = "takeover_expired"
