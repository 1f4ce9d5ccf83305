"""Client-side timing: start-up validation and the conservative local deadline (docs/design.md §3).

The deadline is measured from when the last acknowledged renewal was SENT (not when its
answer or a later failure arrived): the server started the new ttl no earlier than that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


class TimingError(ValueError):
    """An unsafe client timing parameter; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


# What the defaults derive from each lease's own timing (docs/design.md §3): a request never
# takes more than half a renew interval, nor more than this; the safety margin is this, or a
# tenth of a shorter lease's ttl. With them every lease a queue may configure (ttl at least
# 3 x renew_after) can be kept: renew interval + request timeout is at most half the ttl,
# the margin at most a tenth, and 0.99 of the ttl is more than both.
DEFAULT_REQUEST_TIMEOUT_S = 2.0
DEFAULT_SAFETY_MARGIN_S = 1.0


@dataclass(frozen=True)
class ClientTiming:
    """How this client renews and when it stops trusting a lease.

    `request_timeout_s` and `safety_margin_s` left as None are derived per lease (`for_lease`):
    half the lease's renew interval, at most 2 s; a tenth of its ttl, at most 1 s. Set them
    and they are checked against every lease instead (TimingError when one cannot be kept).
    """

    request_timeout_s: float | None = None
    renew_interval_s: float = 5.0  # upper bound; a lease's renew_after_ms may make it shorter
    safety_margin_s: float | None = None  # subtracted from every local deadline
    drift_rate: float = 0.01  # bound on how much faster our clock may run slow vs the server's
    retry_interval_s: float | None = None  # after a transient renew failure; default interval/4

    def validate(self) -> ClientTiming:
        """Refuse unsafe values at start-up, naming the parameter; returns self."""
        if not self.renew_interval_s > 0:
            raise TimingError("renew_interval_s", f"must be positive, got {self.renew_interval_s}")
        timeout = self.request_timeout_s
        if timeout is not None and not timeout > 0:
            raise TimingError("request_timeout_s", f"must be positive, got {timeout}")
        if timeout is not None and timeout > self.renew_interval_s / 2:
            raise TimingError(
                "request_timeout_s",
                f"must be at most half the renew interval ({self.renew_interval_s / 2:g} s), "
                f"got {timeout:g} s: a hung renew would eat the next one's slot",
            )
        if self.safety_margin_s is not None and self.safety_margin_s < 0:
            raise TimingError("safety_margin_s", "must not be negative")
        if not 0 <= self.drift_rate < 0.5:
            raise TimingError("drift_rate", f"must be in [0, 0.5), got {self.drift_rate}")
        if self.retry_interval_s is not None and not 0 < self.retry_interval_s:
            raise TimingError("retry_interval_s", "must be positive")
        return self

    @property
    def timeout_s(self) -> float:
        """The bound of a request not tied to one lease (admit, acquire, propose, ...)."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return min(DEFAULT_REQUEST_TIMEOUT_S, self.renew_interval_s / 2)

    @property
    def retry_s(self) -> float:
        return (
            self.retry_interval_s
            if self.retry_interval_s is not None
            else self.renew_interval_s / 4
        )

    def interval_for(self, renew_after_ms: int | None) -> float:
        """Renew interval for one lease: ours, or the server's hint if that is shorter."""
        if renew_after_ms is None or renew_after_ms <= 0:
            return self.renew_interval_s
        return min(self.renew_interval_s, renew_after_ms / 1000)

    def for_lease(self, *, ttl_ms: int, renew_after_ms: int | None) -> ClientTiming:
        """This timing with what it leaves to be derived filled in for one lease: the request
        timeout from the lease's renew interval, the safety margin from its ttl."""
        interval = self.interval_for(renew_after_ms)
        timeout = self.request_timeout_s
        margin = self.safety_margin_s
        return replace(
            self,
            request_timeout_s=(
                timeout if timeout is not None else min(DEFAULT_REQUEST_TIMEOUT_S, interval / 2)
            ),
            safety_margin_s=(
                margin if margin is not None else min(DEFAULT_SAFETY_MARGIN_S, ttl_ms / 1000 / 10)
            ),
        )

    def validate_lease(self, *, ttl_ms: int, renew_after_ms: int | None) -> ClientTiming:
        """Refuse a lease this client could not keep (a renew must fit before the deadline);
        returns the timing for it (`for_lease`)."""
        lease = self.for_lease(ttl_ms=ttl_ms, renew_after_ms=renew_after_ms)
        interval = lease.interval_for(renew_after_ms)
        timeout = lease.timeout_s
        if timeout > interval / 2:
            raise TimingError(
                "request_timeout_s",
                f"must be at most half the lease's renew interval ({interval / 2:g} s), "
                f"got {timeout:g} s",
            )
        usable = ttl_ms / 1000 * (1 - self.drift_rate) - lease.margin_s
        needed = interval + timeout
        if usable <= needed:
            raise TimingError(
                "ttl_ms",
                f"ttl {ttl_ms} ms leaves {usable:.3f} s after safety_margin_s and drift_rate; "
                f"needs more than renew interval + request timeout ({needed:.3f} s)",
            )
        return lease

    @property
    def margin_s(self) -> float:
        """The safety margin as set, or its cap before a lease says what to derive it from."""
        return self.safety_margin_s if self.safety_margin_s is not None else DEFAULT_SAFETY_MARGIN_S

    def certainly_gone(self, *, arrived_at: float, expires_in_ms: int) -> float:
        """Monotonic time after which the server's lease cannot be live, the mirror of the
        local deadline: the server computed `expires_in_ms` before its answer arrived here
        (at `arrived_at`), refuses any renewal past it, and our clock may run `drift_rate`
        fast; the safety margin is added, not subtracted. A holding past it without a newer
        acknowledgement is lost, and renewing it would only load a server that must refuse."""
        return arrived_at + (expires_in_ms / 1000) * (1 + self.drift_rate) + self.margin_s

    def local_deadline(self, *, sent_at: float, expires_in_ms: int) -> float:
        """Monotonic time after which the holder must consider itself in jeopardy."""
        return local_deadline(
            sent_at=sent_at,
            expires_in_ms=expires_in_ms,
            safety_margin_s=self.margin_s,
            drift_rate=self.drift_rate,
        )


def local_deadline(
    *, sent_at: float, expires_in_ms: int, safety_margin_s: float, drift_rate: float
) -> float:
    """sent_at + expires_in × (1 − drift_rate) − safety_margin (Chubby's conservative rule).

    `sent_at` is the monotonic time the acknowledged request left this process; the server
    computed `expires_in_ms` no earlier than that, so the lease lives at least this long.
    """
    return sent_at + (expires_in_ms / 1000) * (1 - drift_rate) - safety_margin_s
