"""Effect decisions, outcomes and the reconciliation gate (docs/design.md §6).

These enums are the one definition of the values an effect row and a policy row may hold;
model choices and check constraints are derived from them.
"""

from __future__ import annotations

from enum import StrEnum


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
