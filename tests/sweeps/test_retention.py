"""Retention (leaseboard.sweeps.retention): old lease events go in batches, recent stay."""

from __future__ import annotations

import pytest
from django.db import connection

from leaseboard.core.models import LeaseEvent
from leaseboard.sweeps.retention import lease_events_prune
from tests.builders import leased_item

pytestmark = pytest.mark.django_db


def test_events_past_the_age_are_pruned_in_batches(agent):
    bot = agent("old-bot")[0]
    leases = [leased_item(bot) for _ in range(3)]
    old = [lease.id for lease in leases[:2]]
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE core_leaseevent SET at_ms = at_ms - %s WHERE lease_id = ANY(%s::uuid[])",
            [40 * 86_400_000, [str(x) for x in old]],
        )
    assert lease_events_prune(older_than_days=30, batch_size=1) == 2
    assert list(LeaseEvent.objects.values_list("lease_id", flat=True)) == [leases[2].id]
