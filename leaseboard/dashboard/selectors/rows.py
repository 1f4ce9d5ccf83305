"""A lease as the dashboard lists it: its certainty now (computed from the stored times and
the database clock, before any sweep) and the time left, shared by every page that lists
leases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from leaseboard.domain.certainty import Certainty, LeaseTimes, state_at


class TimedLease(Protocol):
    """What a row reads of its lease: a Lease, or the live page's LiveLease."""

    @property
    def state(self) -> str: ...
    @property
    def jeopardy_at_ms(self) -> int: ...
    @property
    def expires_at_ms(self) -> int: ...
    @property
    def max_gap_ms(self) -> int: ...
    @property
    def jeopardy_after_ms(self) -> int: ...


L = TypeVar("L", bound=TimedLease)


def certainty_of(lease: TimedLease, now_ms: int) -> str:
    return state_at(
        LeaseTimes(Certainty(lease.state), lease.jeopardy_at_ms, lease.expires_at_ms), now_ms
    ).value


@dataclass(frozen=True)
class LeaseRow(Generic[L]):
    lease: L
    certainty: str
    expires_in_ms: int
    jeopardy_in_ms: int

    @property
    def live(self) -> bool:
        """Still live by time (not ended, not past its expiry)."""
        return self.certainty in (Certainty.ACTIVE, Certainty.JEOPARDY)

    @property
    def gap_over(self) -> bool:
        """Its largest gap between renewals reached the jeopardy threshold."""
        return self.lease.max_gap_ms >= self.lease.jeopardy_after_ms


def lease_row(lease: L, now_ms: int) -> LeaseRow[L]:
    return LeaseRow(
        lease=lease,
        certainty=certainty_of(lease, now_ms),
        expires_in_ms=max(0, lease.expires_at_ms - now_ms),
        jeopardy_in_ms=max(0, lease.jeopardy_at_ms - now_ms),
    )
