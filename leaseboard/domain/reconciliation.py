"""Effect decisions, outcomes and the reconciliation gate (DESIGN §6)."""

from __future__ import annotations

from enum import StrEnum


class Decision(StrEnum):
    PROPOSED = "proposed"
    AUTHORIZED = "authorized"
    REFUSED = "refused"
    PENDING_APPROVAL = "pending_approval"


class Outcome(StrEnum):
    APPLIED = "applied"
    FAILED = "failed"
    UNKNOWN = "unknown"


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


def policy_for(kind: str, rules: dict[str, str], default: str = PolicyDecision.ALLOW) -> str:
    """The most specific rule wins: exact kind, then `prefix.*`, then `*`."""
    if kind in rules:
        return rules[kind]
    parts = kind.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        pattern = ".".join(parts[:cut]) + ".*"
        if pattern in rules:
            return rules[pattern]
    return rules.get("*", default)
