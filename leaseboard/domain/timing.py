"""Lease timing policy and its start-up validation (docs/design.md §4 and §11), and the bounds
every duration obeys wherever it comes from (settings, a queue, an admitted work item)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

# Durations are stored in 32-bit integer columns on every database (PostgreSQL refuses a
# larger value; SQLite would store it): about 24.8 days.
MAX_DURATION_MS = 2**31 - 1
TIMING_PARAMS = (
    "ttl_ms",
    "renew_after_ms",
    "jeopardy_after_ms",
    "lock_delay_ms",
    "max_lifetime_ms",
)


class TimingPolicyError(ValueError):
    """A timing parameter is unsafe; `param` names it."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class TimingPolicy:
    ttl_ms: int = 15_000
    renew_after_ms: int | None = None  # default ttl/3
    jeopardy_after_ms: int | None = None  # default 2/3 of ttl without renewal
    lock_delay_ms: int = 0
    max_lifetime_ms: int = 24 * 3600 * 1000
    request_timeout_ms: int | None = None  # client-side; default renew_after/2

    def resolved(self) -> TimingPolicy:
        """Fill defaults from the ttl and validate; raises TimingPolicyError naming the field."""
        if self.ttl_ms <= 0:
            raise TimingPolicyError("ttl_ms", "must be positive")
        renew = self.renew_after_ms if self.renew_after_ms is not None else self.ttl_ms // 3
        jeopardy = (
            self.jeopardy_after_ms if self.jeopardy_after_ms is not None else (self.ttl_ms * 2) // 3
        )
        timeout = self.request_timeout_ms if self.request_timeout_ms is not None else renew // 2
        policy = replace(
            self, renew_after_ms=renew, jeopardy_after_ms=jeopardy, request_timeout_ms=timeout
        )
        policy.validate()
        return policy

    def validate(self) -> None:
        renew = self.renew_after_ms
        jeopardy = self.jeopardy_after_ms
        if renew is None or jeopardy is None:
            raise TimingPolicyError("renew_after_ms", "resolve the policy before validating")
        if renew <= 0:
            raise TimingPolicyError("renew_after_ms", "must be positive")
        if self.ttl_ms < 3 * renew:
            raise TimingPolicyError(
                "ttl_ms", f"must be at least 3 x renew_after_ms ({3 * renew}), got {self.ttl_ms}"
            )
        if jeopardy <= 0 or jeopardy >= self.ttl_ms:
            raise TimingPolicyError(
                "jeopardy_after_ms", f"must be between 0 and ttl_ms ({self.ttl_ms}), got {jeopardy}"
            )
        if jeopardy < renew:
            raise TimingPolicyError(
                "jeopardy_after_ms",
                f"must not be shorter than renew_after_ms ({renew}): a healthy holder "
                "would fall into jeopardy between renewals",
            )
        if self.lock_delay_ms < 0:
            raise TimingPolicyError("lock_delay_ms", "must not be negative")
        for param in TIMING_PARAMS:
            if getattr(self, param) > MAX_DURATION_MS:
                raise TimingPolicyError(param, f"must be at most {MAX_DURATION_MS} ms")
        if self.max_lifetime_ms < self.ttl_ms:
            raise TimingPolicyError("max_lifetime_ms", "must be at least ttl_ms")
        if self.request_timeout_ms is not None and self.request_timeout_ms * 2 > renew:
            raise TimingPolicyError(
                "request_timeout_ms",
                f"must be at most half of renew_after_ms ({renew // 2}), "
                f"got {self.request_timeout_ms}",
            )

    def with_overrides(self, overrides: Mapping[str, int | None]) -> TimingPolicy:
        """A policy with per-queue or per-item overrides; derived fields re-defaulted from ttl."""
        unknown = set(overrides) - set(TIMING_PARAMS)
        if unknown:
            raise TimingPolicyError(sorted(unknown)[0], "is not a lease timing parameter")
        base = self
        if "ttl_ms" in overrides and overrides["ttl_ms"] is not None:
            # A new ttl re-derives renew/jeopardy unless they are given too.
            base = replace(
                base, renew_after_ms=None, jeopardy_after_ms=None, request_timeout_ms=None
            )
        values = {k: v for k, v in overrides.items() if v is not None}
        for key, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise TimingPolicyError(key, "must be an integer number of milliseconds")
            if not 0 <= value <= MAX_DURATION_MS:
                raise TimingPolicyError(key, f"must be between 0 and {MAX_DURATION_MS} ms")
        return replace(base, request_timeout_ms=None, **values).resolved()

    def narrowed(self, overrides: dict[str, int | None]) -> TimingPolicy:
        """Overrides asked for by a caller who may tighten this policy (a work item under its
        queue's) but never lengthen how long one grant may live, nor wait longer than that."""
        policy = self.with_overrides(overrides)
        cap = self.max_lifetime_ms
        if policy.max_lifetime_ms > cap:
            raise TimingPolicyError("max_lifetime_ms", f"must be at most the queue's {cap} ms")
        if policy.lock_delay_ms > cap:
            raise TimingPolicyError("lock_delay_ms", f"must be at most the queue's {cap} ms")
        return policy


# -- the fence between holders (docs/design.md §5, "A token dies with the standing it proves")

MAX_SKEW_ALLOWANCE_MS = 60_000


def skew_allowance_checked(skew_ms: int, *, ttl_ms: int) -> int:
    """The clock-skew allowance added to a token's expiry before a successor may act: at
    least 0, below the default ttl (a skew that large makes every lease meaningless) and
    at most a minute. Raises TimingPolicyError naming the setting."""
    param = "LEASEBOARD_FENCING_SKEW_MS"
    if not isinstance(skew_ms, int) or isinstance(skew_ms, bool) or skew_ms < 0:
        raise TimingPolicyError(param, f"must be a non-negative integer, got {skew_ms!r}")
    if skew_ms >= ttl_ms:
        raise TimingPolicyError(
            param, f"must be below the default ttl_ms ({ttl_ms}), got {skew_ms}"
        )
    if skew_ms > MAX_SKEW_ALLOWANCE_MS:
        raise TimingPolicyError(param, f"must be at most {MAX_SKEW_ALLOWANCE_MS}, got {skew_ms}")
    return skew_ms


def fence_after_early_end(
    *, inherited_ms: int, open_token_expiry_ms: int | None, skew_ms: int
) -> int:
    """`fenced_until` of a lease that ends before its time (release, revoke, hand back,
    assign): the last still-open effect token's expiry plus the skew allowance, or the
    fence it inherited if that is later; 0 (no wait) when every effect has its outcome."""
    own = open_token_expiry_ms + skew_ms if open_token_expiry_ms is not None else 0
    return max(inherited_ms, own)


def next_grant_at_ms(
    *,
    expired: bool,
    expires_at_ms: int,
    lock_delay_ms: int,
    fenced_until_ms: int,
    skew_ms: int,
    open_tokens: bool,
) -> int:
    """When the latest lease of a work item lets the next grant happen (0: now). After an
    expiry every token it issued is dead at `expires_at`, so the wait is its lock delay,
    and at least the skew allowance if an effect under it still has no outcome
    (`open_tokens`); an early end recorded its own `fenced_until`, and a grant made
    through a fence carries it. The SQL form of this rule, for the acquire's gate read, is
    `leaseboard.core.services.leases.base.next_grant_at_sql`."""
    until = fenced_until_ms
    if expired:
        until = max(until, expires_at_ms + max(lock_delay_ms, skew_ms if open_tokens else 0))
    return until
