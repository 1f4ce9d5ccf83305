"""The sweep clock and outage recovery (docs/design.md §8).

Every sweep stamps the clock (`SweepState.last_sweep_at_ms`). A gap since the previous
sweep longer than LEASEBOARD_OUTAGE_MIN_MS is an outage window: nothing swept (or nothing
could commit) during it, so a lease that fell due in it for longer than its own ttl gets a
recovery grace instead of expiring (leaseboard.sweeps.batch), and the window raises ONE
summary alert. The window's cause names a database outage when the caller saw one; an
expiry it caused says so in its alert instead of blaming the holder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction

from leaseboard.core.clock import DbNowMs, db_now_ms
from leaseboard.core.dbfaults import long_bounds
from leaseboard.core.models import Alert, Lease
from leaseboard.core.models.leases import LIVE_STATES
from leaseboard.core.services.alerts import alerts_open
from leaseboard.sweeps.models import SweepState
from leaseboard.sweeps.report import SweepReport

log = logging.getLogger(__name__)


class Claimed(Protocol):
    """What a sweep's claim reads of a due lease (a row of the claim, or a Lease)."""

    state: str
    renewed_at_ms: int
    ttl_ms: int
    jeopardy_at_ms: int
    expires_at_ms: int
    max_expires_at_ms: int
    due_at_ms: int


@dataclass(frozen=True)
class OutageWindow:
    from_ms: int
    to_ms: int
    cause: str = ""  # SweepState.OutageCause, or "" (not known)

    def covers(self, lease: Claimed) -> bool:
        """A lease that fell due while nothing swept, for longer than its own ttl."""
        return self.from_ms < lease.due_at_ms <= self.to_ms and (
            self.to_ms - self.from_ms > lease.ttl_ms
        )

    def blamed_for(self, lease: Claimed) -> dict[str, Any] | None:
        """The outage as the cause of this lease's expiry, or None: only a database outage
        (no renewal could commit during it), only a lease still live when it began whose
        holder has not renewed since it ended (so it expired during it, or at the end of
        the recovery grace). Goes into the expiry alert's detail."""
        if self.cause != SweepState.OutageCause.DATABASE_UNAVAILABLE:
            return None
        if lease.renewed_at_ms >= self.to_ms or lease.expires_at_ms <= self.from_ms:
            return None
        return {
            "cause": self.cause,
            "outage_from_ms": self.from_ms,
            "outage_to_ms": self.to_ms,
        }


@transaction.atomic(durable=True)
def sweep_clock_tick(
    report: SweepReport | None = None, *, outage_cause: str = ""
) -> OutageWindow | None:
    """Stamp the sweep clock. A gap since the previous sweep longer than
    LEASEBOARD_OUTAGE_MIN_MS is recorded as an outage window (with its cause:
    `outage_cause`, else `sweeps_stopped`) and, if any lease fell due in it for longer than
    its ttl, raises ONE summary alert. Returns the current window."""
    long_bounds()  # no hot path: batches are sized to finish far inside them
    now = db_now_ms()
    SweepState.objects.bulk_create([SweepState(id=1, last_sweep_at_ms=now)], ignore_conflicts=True)
    state = SweepState.objects.select_for_update(no_key=True).get(id=1)
    gap = now - state.last_sweep_at_ms
    if gap > settings.LEASEBOARD_OUTAGE_MIN_MS:
        _outage_record(state, now, outage_cause, report)
    state.last_sweep_at_ms = max(state.last_sweep_at_ms, now)
    state.save()
    if state.outage_from_ms is None or state.outage_to_ms is None:
        return None
    return OutageWindow(state.outage_from_ms, state.outage_to_ms, state.outage_cause)


def sweep_clock_stamp() -> None:
    """A batch committed: the sweep is at work, and the clock moves on (never back: two
    sweeps stamp it). Without this a long sweep, an expiry storm's 200 batches of 500, was
    taken for an outage by the next sweep to start (`make storm`: "sweeps were away for
    16153 ms", and 500 leases due got a recovery grace and expired a ttl late)."""
    SweepState.objects.filter(id=1, last_sweep_at_ms__lt=DbNowMs()).update(
        last_sweep_at_ms=DbNowMs()
    )


def _outage_record(
    state: SweepState, now: int, outage_cause: str, report: SweepReport | None
) -> None:
    """The gap since the last sweep as the outage window on `state` (saved by the caller),
    and its summary alert when leases fell due in it."""
    gap = now - state.last_sweep_at_ms
    state.outage_from_ms, state.outage_to_ms = state.last_sweep_at_ms, now
    state.outage_cause = outage_cause or SweepState.OutageCause.SWEEPS_STOPPED
    affected = Lease.objects.filter(
        state__in=LIVE_STATES,
        due_at_ms__gt=state.outage_from_ms,
        due_at_ms__lte=now,
        ttl_ms__lt=gap,
    ).count()  # bounded by the leases that fell due in the window (lease_due_idx)
    log.warning(
        "sweeps were away for %d ms (%s); %d leases get a recovery grace",
        gap,
        state.outage_cause,
        affected,
    )
    if not affected:
        return
    ids = alerts_open([_recovery_alert(state, now, affected)])
    if report is not None and ids:
        report.recovery_alert_id = ids[0]
        report.alert_ids.extend(ids)
        report.alerts_by_kind[Alert.Kind.RECOVERY.value] += 1


def _recovery_alert(state: SweepState, now: int, affected: int) -> Alert:
    """The one summary alert of an outage window in which `affected` leases fell due."""
    assert state.outage_from_ms is not None
    gap = now - state.outage_from_ms
    unavailable = state.outage_cause == SweepState.OutageCause.DATABASE_UNAVAILABLE
    cause = (
        f"The database was unavailable for {gap / 1000:.1f} s: no renewal or sweep could commit; "
        if unavailable
        else f"No sweep ran for {gap / 1000:.1f} s; "
    )
    return Alert(
        kind=Alert.Kind.RECOVERY,
        dedupe_key=f"recovery:{state.outage_from_ms}",
        message=(
            cause + f"{affected} overdue leases moved to jeopardy with a recovery "
            "grace instead of expiring"
        ),
        detail={
            "cause": state.outage_cause,
            "outage_from_ms": state.outage_from_ms,
            "outage_to_ms": now,
            "gap_ms": gap,
            "leases": affected,
        },
        due_at_ms=state.outage_from_ms,
        opened_at_ms=now,
    )
