"""leaseboard.takeovers.sweep on real PostgreSQL: the step every lease sweep runs expires
the takeover requests undecided past their deadline, each once, batch after batch."""

from __future__ import annotations

import pytest

from leaseboard.takeovers.models import TakeoverRequest
from leaseboard.takeovers.services import decision_ttl_ms
from leaseboard.takeovers.sweep import takeover_sweep_step
from tests.builders import leased_item, request_for

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("fast_passwords")]


def test_the_step_expires_due_requests_once_in_batches(people, agent, db_clock):  # type: ignore[no-untyped-def]
    for n in range(3):
        executor, _ = agent()
        request_for(leased_item(executor, key=f"ts-{n}").work_item.key, people.operator)
    assert takeover_sweep_step() == 0  # none due yet
    db_clock.advance(decision_ttl_ms() + 1)
    assert takeover_sweep_step(batch_size=2) == 3  # batch after batch until none is due
    assert set(TakeoverRequest.objects.values_list("status", flat=True)) == {"expired"}
    assert takeover_sweep_step() == 0
