"""Certainty states of a lease and how time moves them (docs/design.md §4).

Validity is a function of time: `state_at` answers from the stored times alone, so a lease
past its `expires_at` is invalid whether or not a sweep has marked it yet. `Certainty` is
also the one definition of the stored lease state (`Lease.State` and its constraints).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Certainty(StrEnum):
    ACTIVE = "active"
    JEOPARDY = "jeopardy"
    EXPIRED = "expired"
    RELEASED = "released"
    REVOKED = "revoked"


LIVE = frozenset({Certainty.ACTIVE, Certainty.JEOPARDY})
TERMINAL = frozenset({Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED})

# Allowed stored-state transitions. Terminal states never come back.
TRANSITIONS: dict[Certainty, frozenset[Certainty]] = {
    Certainty.ACTIVE: frozenset(
        {Certainty.JEOPARDY, Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED}
    ),
    Certainty.JEOPARDY: frozenset(
        {Certainty.ACTIVE, Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED}
    ),
    Certainty.EXPIRED: frozenset(),
    Certainty.RELEASED: frozenset(),
    Certainty.REVOKED: frozenset(),
}


def can_transition(old: Certainty, new: Certainty) -> bool:
    return new in TRANSITIONS[old]


@dataclass(frozen=True)
class LeaseTimes:
    """The stored facts that decide certainty; all times are database-clock milliseconds."""

    state: Certainty
    jeopardy_at_ms: int
    expires_at_ms: int


def state_at(times: LeaseTimes, now_ms: int) -> Certainty:
    """The certainty the lease has at `now_ms`, whatever a sweep has materialized so far."""
    if times.state in TERMINAL:
        return times.state
    if now_ms >= times.expires_at_ms:
        return Certainty.EXPIRED
    if times.state is Certainty.JEOPARDY or now_ms >= times.jeopardy_at_ms:
        return Certainty.JEOPARDY
    return Certainty.ACTIVE


def may_authorize_effects(certainty: Certainty) -> bool:
    """Quiescence, not optimism: only an active lease may start new effects."""
    return certainty is Certainty.ACTIVE


def may_renew(certainty: Certainty) -> bool:
    return certainty in LIVE
