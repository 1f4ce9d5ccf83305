"""leaseboard.takeovers.services._common, the parts every takeover service shares: the
limits come from settings (read at each call, so a changed setting applies at once), and
a standing asked for is checked against them with a clear error naming the parameter."""

from __future__ import annotations

import pytest

from leaseboard.domain.errors import ValidationFailed
from leaseboard.takeovers.services import _common
from leaseboard.takeovers.services._common import (
    decision_ttl_ms,
    reason_checked,
    standing_checked,
    standing_default_ms,
    standing_max_ms,
    standing_min_ms,
)


@pytest.fixture
def limits(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_TAKEOVER_MIN_STANDING_MS = 2 * 60_000
    settings.LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS = 10 * 60_000
    settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS = 60 * 60_000
    settings.LEASEBOARD_TAKEOVER_DECISION_TTL_MS = 5 * 60_000


def test_the_limits_are_the_settings_at_each_call(limits, settings) -> None:  # type: ignore[no-untyped-def]
    assert (standing_min_ms(), standing_default_ms(), standing_max_ms()) == (
        120_000,
        600_000,
        3_600_000,
    )
    assert decision_ttl_ms() == 300_000
    settings.LEASEBOARD_TAKEOVER_DECISION_TTL_MS = 20_000
    assert decision_ttl_ms() == 20_000


def test_standing_is_the_default_when_not_given_and_checked_when_given(limits) -> None:  # type: ignore[no-untyped-def]
    assert standing_checked(None) == 600_000
    assert standing_checked(120_000) == 120_000 and standing_checked(3_600_000) == 3_600_000
    for bad in (119_999, 3_600_001, 0, -5):
        with pytest.raises(ValidationFailed, match="between 2 and 60 minutes") as err:
            standing_checked(bad)
        assert err.value.code == "validation_error" and err.value.extra == {"param": "standing_ms"}
    for wrong in ("600000", 1.5, True):
        with pytest.raises(ValidationFailed, match="number of milliseconds"):
            standing_checked(wrong)  # type: ignore[arg-type]
    assert _common.MINUTE_MS == 60_000


def test_a_takeover_needs_a_known_reason_category_and_a_text() -> None:
    assert reason_checked("stuck", "  agent loops on the refund step ").strip() == (
        "agent loops on the refund step"
    )
    with pytest.raises(ValidationFailed):
        reason_checked("stuck", "")
    with pytest.raises(ValidationFailed):
        reason_checked("bored", "no reason")
