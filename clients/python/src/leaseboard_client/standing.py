"""Standing on one lease as this process believes it, and the renewer's round, with no I/O.

The sync `Holding` (threads) and the `AsyncHolding` (asyncio) are both a `Standing`, and
both renewers decide what is due and apply a batch's answer with the functions here, so
local jeopardy and self-fencing are one piece of code whichever API an agent uses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from leaseboard_client.errors import (
    TERMINAL_CODES,
    LeaseError,
    LeaseExpired,
    LeaseReleased,
    LocalJeopardy,
    OnHold,
    ProtocolError,
)
from leaseboard_client.protocol import Grant, RenewResult
from leaseboard_client.timing import ClientTiming

log = logging.getLogger("leaseboard_client")

H = TypeVar("H", bound="Standing")


class Standing:
    """The local deadline, what renewals taught us, and whether the lease is lost.

    Guarded calls raise `LocalJeopardy` once the local deadline passes, and the
    authoritative error once the server says the lease is gone (`ensure()`).
    """

    def __init__(
        self,
        grant: Grant,
        *,
        timing: ClientTiming,
        clock: Callable[[], float],
        on_lost: Callable[[Any, LeaseError], object] | None = None,
    ) -> None:
        self.lease_id = grant.lease_id
        self.work_key = grant.work_key
        self.epoch = grant.epoch
        self.generation = grant.generation  # the fencing order is (generation, epoch)
        self.ttl_ms = grant.ttl_ms
        self.checkpoint_data = grant.checkpoint  # the predecessor's latest checkpoint
        # The client's timing with what it derives filled in for this lease (docs/design.md §3).
        timing = timing.for_lease(ttl_ms=grant.ttl_ms, renew_after_ms=grant.renew_after_ms)
        self.timing = timing
        self.clock = clock
        self.on_lost = on_lost
        self.interval_s = timing.interval_for(grant.renew_after_ms)
        self.request_timeout_s = timing.timeout_s  # a renew of this lease gives up after this
        self._lock = threading.Lock()
        self._fencing_token = grant.fencing_token
        self._deadline = timing.local_deadline(
            sent_at=grant.sent_at, expires_in_ms=grant.expires_in_ms
        )
        # A token dies with the lease as it stood at issue: the lease token with the grant.
        self._token_deadline = self._deadline
        # Past this with no newer acknowledgement the server's lease is certainly gone.
        self._gone_at = timing.certainly_gone(arrived_at=clock(), expires_in_ms=grant.expires_in_ms)
        self.last_ack_sent_at = grant.sent_at
        self.next_renew_at = grant.sent_at + self.interval_s
        self.certainty: str | None = "active"
        # An operator's hold, as the last renewal (or a refused proposal) said: the lease
        # stays ours and keeps renewing, but no new effect is proposed (local quiescence).
        self.hold_reason: str | None = None
        self.consecutive_failures = 0
        self.last_error: LeaseError | None = None
        self._lost: LeaseError | None = None
        self._released = False

    # -- state -----------------------------------------------------------------------------

    @property
    def deadline(self) -> float:
        """Monotonic time after which this holder is in jeopardy whatever the server says."""
        return self._deadline

    @property
    def fencing_token(self) -> str | None:
        """The lease's token: proves standing, authorizes no effect (an effect has its own)."""
        return self._fencing_token

    def remaining_s(self) -> float:
        return self._deadline - self.clock()

    @property
    def in_jeopardy(self) -> bool:
        return self.clock() >= self._deadline

    @property
    def lost(self) -> LeaseError | None:
        """The authoritative error that ended this holding, if any."""
        return self._lost

    @property
    def released(self) -> bool:
        return self._released

    @property
    def active(self) -> bool:
        return self._lost is None and not self._released and not self.in_jeopardy

    def ensure(self) -> None:
        """Raise unless this holder may act now (lost, released, or past the local deadline)."""
        if self._lost is not None:
            raise self._lost
        if self._released:
            raise LeaseReleased("this holding was released", code="lease_released")
        now = self.clock()
        if now >= self._deadline:
            raise LocalJeopardy(
                f"local deadline for {self.work_key!r} (epoch {self.epoch}) passed "
                f"{now - self._deadline:.3f} s ago; the last acknowledged renewal was sent "
                f"{now - self.last_ack_sent_at:.3f} s ago"
            )

    @property
    def on_hold(self) -> bool:
        return self.hold_reason is not None

    def ensure_may_propose(self) -> None:
        """`ensure()`, and raise OnHold while an operator holds the lease (before any
        request: the server would refuse it `on_hold`)."""
        self.ensure()
        if self.hold_reason is not None:
            raise OnHold(
                f"an operator put {self.work_key!r} (epoch {self.epoch}) on hold: "
                f"{self.hold_reason}; keep renewing, propose nothing until it is released",
                code="on_hold",
            )

    def _headers(self, token: str | None) -> dict[str, str]:
        """Headers for an outgoing call to a recipient: epoch, work key and `token`, else
        the lease token (which recipients refuse for effects unless configured to accept it).
        Raises, like every guarded call, without standing."""
        self.ensure()
        headers = {"X-Lease-Epoch": str(self.epoch), "X-Work-Key": self.work_key}
        if token is None and self._fencing_token:
            if self.clock() >= self._token_deadline:
                raise LocalJeopardy(
                    "the lease token died with the lease as it was granted (a renewal does "
                    "not stretch it); send an effect's token"
                )
            token = self._fencing_token
        if token:
            headers["X-Fencing-Token"] = token
        return headers

    # -- what the server said ---------------------------------------------------------------

    def _seen(self, error: LeaseError) -> None:
        """An answer to any call under this lease: an authoritative refusal ends it; a hold
        quiesces it until a renewal says the hold is released."""
        if error.code in TERMINAL_CODES:
            self._lose(error)
        elif error.code == "on_hold":
            with self._lock:
                self.hold_reason = str(error) or "on hold"

    def _renewed(
        self,
        *,
        sent_at: float,
        expires_in_ms: int,
        fencing_token: str | None = None,
        certainty: str | None = None,
        hold_reason: str | None = None,
    ) -> None:
        deadline = self.timing.local_deadline(sent_at=sent_at, expires_in_ms=expires_in_ms)
        gone_at = self.timing.certainly_gone(arrived_at=self.clock(), expires_in_ms=expires_in_ms)
        with self._lock:
            if self._lost is not None or self._released:
                return
            self._gone_at = max(self._gone_at, gone_at)
            # Each ack is a lower bound on the lease's life; a late answer to an older
            # request must not pull the deadline back.
            self._deadline = max(self._deadline, deadline)
            self.last_ack_sent_at = max(self.last_ack_sent_at, sent_at)
            self.next_renew_at = self.last_ack_sent_at + self.interval_s
            self.consecutive_failures = 0
            self.last_error = None
            if fencing_token:
                self._fencing_token = fencing_token
                self._token_deadline = deadline
            if certainty:
                self.certainty = certainty
            if sent_at >= self.last_ack_sent_at:
                self.hold_reason = hold_reason  # the newest answer says whether it holds

    def _renew_failed(self, error: LeaseError, *, now: float, quiet: bool = False) -> None:
        if error.code in TERMINAL_CODES:
            self._lose(error)
            return
        # One transient failure is not abdication: retry soon, the deadline still stands.
        with self._lock:
            self.consecutive_failures += 1
            self.last_error = error
            self.next_renew_at = now + min(self.timing.retry_s, self.interval_s)
        if quiet:
            return
        log.warning(
            "renew of %s failed (%d in a row, %.3f s to local deadline): %s",
            self.lease_id,
            self.consecutive_failures,
            self._deadline - now,
            error,
        )

    def _gone_by(self, now: float) -> bool:
        """Lose this holding, without asking, once the server's lease cannot be live
        (`ClientTiming.certainly_gone` of the newest acknowledgement): an outage or an
        overloaded server kept every renewal from being answered, and the server refuses
        a renewal past the expiry. True when it is (now) lost."""
        if self._lost is not None or self._released:
            return self._lost is not None
        if now < self._gone_at:
            return False
        self._lose(
            LeaseExpired(
                f"expired: no renewal of {self.work_key!r} (epoch {self.epoch}) was "
                f"acknowledged for {now - self.last_ack_sent_at:.3f} s, past its "
                f"{self.ttl_ms} ms ttl, so the server's lease cannot be live; acquire again",
                code="lease_expired",
            )
        )
        return True

    def _lose(self, error: LeaseError) -> None:
        with self._lock:
            if self._lost is not None or self._released:
                return
            self._lost = error
        self._forget()
        if self.on_lost is not None:
            try:
                self.on_lost(self, error)
            except Exception:  # a callback bug must not kill the renewer
                log.exception("on_lost callback for %s raised", self.lease_id)

    def _mark_released(self) -> bool:
        """Stop for good; True if the server should be told (not released, not lost)."""
        self._forget()
        with self._lock:
            if self._released:
                return False
            self._released = True
            return self._lost is None

    def _forget(self) -> None:
        """Leave the renewer (the subclass knows which one)."""


# -- the renewer's round, shared by the thread and the asyncio renewers ------------------------


def due(holdings: Sequence[H], now: float) -> list[H]:
    """What to renew now: nothing until one is due, then everything within half an interval
    of due (renewing a little early costs nothing and aligns leases into one request).
    A holding whose lease is certainly gone is lost here and never sent again."""
    holdings = [h for h in holdings if not h._gone_by(now)]
    if not holdings or min(h.next_renew_at for h in holdings) > now:
        return []
    return [h for h in holdings if h.next_renew_at <= now + h.interval_s / 2]


def next_due(holdings: Sequence[Standing]) -> float | None:
    return min((h.next_renew_at for h in holdings), default=None)


def apply_results(group: Sequence[Standing], results: list[RenewResult], now: float) -> None:
    by_id = {r.lease_id: r for r in results}
    for h in group:
        result = by_id.get(h.lease_id)
        if result is None:
            h._renew_failed(ProtocolError("no result for this lease in batch renew"), now=now)
        elif result.ok and result.expires_in_ms is not None:
            h._renewed(
                sent_at=result.sent_at,
                expires_in_ms=result.expires_in_ms,
                fencing_token=result.fencing_token,
                hold_reason=result.hold_reason,
            )
        else:
            h._renew_failed(result.error or ProtocolError("renew not ok"), now=now)


def apply_failure(group: Sequence[Standing], error: LeaseError, now: float) -> None:
    # A failed request says nothing authoritative about any single lease.
    if error.code in TERMINAL_CODES:
        error = ProtocolError(
            f"batch renew failed: {error}", status=error.status, problem=error.problem
        )
    for h in group:
        h._renew_failed(error, now=now, quiet=True)
    # One line per failed request, not one per lease: a thousand holdings, one warning.
    log.warning(
        "batch renew of %d lease(s) failed (%.3f s to the nearest local deadline): %s",
        len(group),
        min(h.deadline for h in group) - now,
        error,
    )
