"""Resolving alerts and the reconciliation alerts (leaseboard.core.services.alert_resolution)."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert
from leaseboard.core.services.alert_raise import alerts_open, lease_alert
from leaseboard.core.services.alert_resolution import (
    alerts_resolve,
    reconciliation_alerts_open,
    reconciliation_alerts_resolve_if_done,
)
from tests.builders import leased_item

pytestmark = pytest.mark.django_db


def test_resolving_needs_a_lease_or_a_work_item_and_keeps_other_kinds(agent):
    with pytest.raises(ValueError):
        alerts_resolve(now_ms=1)
    lease = leased_item(agent("resolver")[0])
    alerts_open(
        [lease_alert(lease, k, "m", due_at_ms=1, now_ms=1) for k in ("jeopardy", "expired")]
    )
    assert alerts_resolve(now_ms=5, lease=lease, keep_kinds=("expired",)) == 1
    assert list(
        Alert.objects.filter(resolved_at_ms__isnull=True).values_list("kind", flat=True)
    ) == ["expired"]


def test_no_effect_without_an_outcome_no_reconciliation_alert(agent):
    lease = leased_item(agent("clean-bot")[0])
    assert reconciliation_alerts_open([lease], now_ms=1) == []
    assert reconciliation_alerts_open([], now_ms=1) == []
    assert reconciliation_alerts_resolve_if_done(work_item_id=lease.work_item_id, now_ms=1) == 0
