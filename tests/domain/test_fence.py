"""The fence between holders as pure rules (no database): a token's expiry, the skew
allowance's validation, and when the next grant may happen after each kind of end."""

from __future__ import annotations

import pytest

from leaseboard.domain.fencing import token_expiry_ms
from leaseboard.domain.timing import (
    TimingPolicyError,
    fence_after_early_end,
    next_grant_at_ms,
    skew_allowance_checked,
)


@pytest.mark.parametrize(
    ("lease_expires", "now", "max_ttl", "expected"),
    [
        (15_000, 1_000, 60_000, 15_000),  # the lease's expiry at issue
        (15_000, 14_999, 60_000, 15_000),  # late in the lease: never stretched
        (100_000, 1_000, 60_000, 61_000),  # long human standing: capped after issue
    ],
)
def test_a_token_dies_with_the_lease_at_issue(lease_expires, now, max_ttl, expected) -> None:
    assert token_expiry_ms(lease_expires_at_ms=lease_expires, now_ms=now, max_ttl_ms=max_ttl) == (
        expected
    )


@pytest.mark.parametrize(
    ("skew", "ttl", "problem"),
    [
        (0, 15_000, None),
        (1_000, 15_000, None),
        (-1, 15_000, "non-negative"),
        (15_000, 15_000, "below the default ttl_ms"),
        (61_000, 120_000, "at most 60000"),
    ],
)
def test_the_skew_allowance_is_validated_naming_the_setting(skew, ttl, problem) -> None:
    if problem is None:
        assert skew_allowance_checked(skew, ttl_ms=ttl) == skew
        return
    with pytest.raises(TimingPolicyError, match=problem) as info:
        skew_allowance_checked(skew, ttl_ms=ttl)
    assert info.value.param == "LEASEBOARD_FENCING_SKEW_MS"


@pytest.mark.parametrize(
    ("inherited", "open_expiry", "expected"),
    [
        (0, None, 0),  # every outcome is in: no wait
        (0, 9_000, 10_000),  # the last open token's expiry + skew
        (20_000, 9_000, 20_000),  # a fence inherited from an earlier holder outlasts it
        (5_000, 9_000, 10_000),
    ],
)
def test_an_early_end_fences_until_the_open_tokens_are_dead(
    inherited, open_expiry, expected
) -> None:
    got = fence_after_early_end(
        inherited_ms=inherited, open_token_expiry_ms=open_expiry, skew_ms=1_000
    )
    assert got == expected


@pytest.mark.parametrize(
    ("expired", "lock_delay", "fenced_until", "open_tokens", "expected"),
    [
        (True, 0, 0, False, 10_000),  # expired, nothing open: at the expiry
        (True, 0, 0, True, 11_000),  # an open token: the skew allowance too
        (True, 5_000, 0, True, 15_000),  # a lock delay longer than the skew wins
        (True, 0, 30_000, False, 30_000),  # a fence inherited through a takeover
        (False, 5_000, 0, True, 0),  # released, outcomes in: no lock delay
        (False, 0, 12_000, True, 12_000),  # revoked with open tokens
    ],
)
def test_when_the_next_grant_may_happen(
    expired, lock_delay, fenced_until, open_tokens, expected
) -> None:
    got = next_grant_at_ms(
        expired=expired,
        expires_at_ms=10_000,
        lock_delay_ms=lock_delay,
        fenced_until_ms=fenced_until,
        skew_ms=1_000,
        open_tokens=open_tokens,
    )
    assert got == expected
