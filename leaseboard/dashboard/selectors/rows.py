"""A lease as the dashboard lists it: its certainty now (computed from the stored times and
the database clock, before any sweep) and the time left, shared by every page that lists
leases."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

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
class PendingTakeover:
    """A takeover request waiting for an approver on a row's work item (the live page)."""

    id: int
    requested_by: str  # the requester's username
    requested_by_id: int
    grantee: str  # who would get standing
    to_requester: bool  # the grantee is the requester's own human executor


@dataclass(frozen=True)
class LeaseRow(Generic[L]):
    lease: L
    certainty: str
    expires_in_ms: int
    jeopardy_in_ms: int
    pending: PendingTakeover | None = None  # set on the live page's live rows

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


# The live page's row: its lease's own fields, then its work item's, queue's and holder's.
ROW_FIELDS = (
    "id",
    "epoch",
    "state",
    "grant_kind",
    "granted_at_ms",
    "renewed_at_ms",
    "jeopardy_at_ms",
    "expires_at_ms",
    "due_at_ms",
    "ended_at_ms",
    "end_reason",
    "renew_count",
    "max_gap_ms",
    "jeopardy_after_ms",
    "ttl_ms",
    "held_at_ms",
    "hold_reason",
    "holder_id",
    "work_item__key",
    "work_item__held_at_ms",
    "work_item__hold_reason",
    "work_item__queue__name",
    "holder__name",
    "holder__kind",
)


@dataclass(slots=True)
class LiveQueue:
    name: str


@dataclass(slots=True)
class LiveItem:
    key: str
    held_at_ms: int | None
    hold_reason: str
    queue: LiveQueue


@dataclass(slots=True)
class LiveHolder:
    name: str
    kind: str


@dataclass(slots=True)
class LiveLease:
    """A lease as the live page lists it, read as plain values: the page reads up to 2 x 201
    rows per view and polls every 2 s, and four model instances a row (lease, work item,
    queue, holder, with their deferred fields) cost more than the rows' SQL (about 5 ms of a
    50-row search at 100k leases). The attribute paths are the model's, so the template,
    the sort keys ("work_item__key") and the cursor read it as they read a Lease."""

    id: uuid.UUID
    epoch: int
    state: str
    grant_kind: str
    granted_at_ms: int
    renewed_at_ms: int
    jeopardy_at_ms: int
    expires_at_ms: int
    due_at_ms: int
    ended_at_ms: int | None
    end_reason: str
    renew_count: int
    max_gap_ms: int
    jeopardy_after_ms: int
    ttl_ms: int
    held_at_ms: int | None
    hold_reason: str
    holder_id: int
    work_item: LiveItem
    holder: LiveHolder
    # The urgency sort's columns, when the page is sorted by it (selectors/live.py).
    urgency: int = 3
    urgent_due: int = 0

    @classmethod
    def from_values(cls, values: tuple[Any, ...]) -> LiveLease:
        """From a row of ROW_FIELDS, in that order (its first 18 are this class's own),
        optionally followed by the urgency sort's two columns."""
        extra = values[len(ROW_FIELDS) :]
        *own, key, held_at_ms, hold_reason, queue, holder_name, holder_kind = values[
            : len(ROW_FIELDS)
        ]
        item = LiveItem(key, held_at_ms, hold_reason, LiveQueue(queue))
        holder = LiveHolder(holder_name, holder_kind)
        return cls(*own, item, holder, *extra)  # type: ignore[call-arg]  # ROW_FIELDS' order
