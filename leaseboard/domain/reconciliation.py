"""Effect decisions, outcomes and the reconciliation gate (docs/design.md §6).

These enums are the one definition of the values an effect row and a policy row may hold;
model choices and check constraints are derived from them.
"""

from __future__ import annotations

from enum import StrEnum

from leaseboard.domain.errors import ValidationFailed

KIND_MAX, TARGET_MAX = 100, 500  # an effect's own field bounds (core.models.Effect)


def effect_names_checked(kind: str, target: str) -> None:
    """An effect's kind and target fit its own fields (1 to KIND_MAX, 1 to TARGET_MAX
    characters): one check for a proposal and for an explanation of one."""
    if not kind or len(kind) > KIND_MAX:
        raise ValidationFailed(f"kind is 1 to {KIND_MAX} characters", param="kind")
    if not target or len(target) > TARGET_MAX:
        raise ValidationFailed(f"target is 1 to {TARGET_MAX} characters", param="target")


class Decision(StrEnum):
    # An effect row is written with its decision; there is no stored "proposed" state.
    AUTHORIZED = "authorized"
    REFUSED = "refused"
    PENDING_APPROVAL = "pending_approval"


class Outcome(StrEnum):
    APPLIED = "applied"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Source(StrEnum):
    AGENT = "agent"  # proposed through the API
    HUMAN = "human"  # recorded by a human acting under standing
    RECIPIENT = "recipient"  # a refusal reported by a recipient's guard


class Resolution(StrEnum):
    CONFIRMED = "confirmed"
    NOT_APPLIED = "not_applied"
    COMPENSATED = "compensated"


class PolicyDecision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    REQUIRE_APPROVAL = "require_approval"


def needs_reconciliation(decision: str, outcome: str | None, resolution: str | None) -> bool:
    """An authorized effect whose outcome nobody knows blocks completion until resolved."""
    if resolution:
        return False
    if decision != Decision.AUTHORIZED:
        return False
    return outcome in (None, "", Outcome.UNKNOWN)
