"""How long expiry sweeps have been stopped, as /healthz, /metrics and the banner say it."""

from __future__ import annotations

import pytest

from leaseboard.domain.sweeps import sweep_age_from


@pytest.mark.parametrize(
    ("last", "now", "stale", "words"),
    [
        (None, 5_000, True, ""),  # none ever completed: stale
        (1_000, 1_000, False, "0 s ago"),
        (1_000, 11_000, False, "10 s ago"),  # exactly the threshold: not yet
        (1_000, 11_001, True, "10 s ago"),
        (0, 150_000, True, "2 min ago"),
        (0, 7_200_000, True, "2 h ago"),
        (5_000, 1_000, False, "0 s ago"),  # a clock read just before the stamp
    ],
)
def test_a_sweep_is_stale_past_the_threshold_or_when_none_completed(last, now, stale, words):
    age = sweep_age_from(last, now, 10.0)
    assert (age.stale, age.words) == (stale, words)
