"""A queue's envelope where work is admitted and leases granted
(leaseboard/core/services/envelopes.py), on real PostgreSQL: each refusal names the limit
that refused; a queue without limits costs nothing and refuses nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaseboard.core.models import Queue, WorkItem
from leaseboard.core.services.envelopes import envelope_admit_check, envelope_grant_check_locked
from leaseboard.domain.errors import CapacityExhausted, WorkNotAdmitted
from tests.builders import admit, leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_admission_checks_the_scopes_the_queue_admits() -> None:
    queue = Queue.objects.create(name="eu-only", admits_scopes={"region": ["eu-*"]})
    envelope_admit_check(queue, {"region": "eu-west"})
    with pytest.raises(WorkNotAdmitted, match="outside what the queue admits") as refused:
        envelope_admit_check(queue, {"region": "us-east"})
    assert refused.value.extra == {"limit": "scope", "queue": "eu-only"}
    with pytest.raises(WorkNotAdmitted, match="whose scope has 'region'"):
        envelope_admit_check(queue, {})
    envelope_admit_check(Queue.objects.get(name="default"), {"anything": 1})


def test_an_agent_holds_at_most_its_limit_of_live_leases_in_a_queue(agent) -> None:  # type: ignore[no-untyped-def]
    Queue.objects.create(name="narrow", leases_per_agent=1)
    executor, _ = agent()
    leased_item(executor, key="narrow-1", queue="narrow")
    second = admit("narrow-2", queue="narrow")
    item = WorkItem.objects.select_related("queue").get(id=second.id)
    with pytest.raises(CapacityExhausted, match="its limit per agent") as refused:
        envelope_grant_check_locked(item=item, executor=executor, now_ms=0)
    assert refused.value.extra == {"limit": "leases_per_agent", "leases_per_agent": 1}
    other, _ = agent()
    envelope_grant_check_locked(item=item, executor=other, now_ms=0)  # its own limit


def test_outside_its_time_windows_a_queue_grants_nothing_and_says_when_it_opens(agent) -> None:  # type: ignore[no-untyped-def]
    windows = {"tz": "UTC", "open": [{"days": "mon-fri", "from": "09:00", "to": "17:00"}]}
    Queue.objects.create(name="office", windows=windows)
    executor, _ = agent()
    item = WorkItem.objects.select_related("queue").get(id=admit("office-1", queue="office").id)
    monday_8 = int(datetime(2026, 11, 30, 8, 0, tzinfo=UTC).timestamp() * 1000)
    with pytest.raises(WorkNotAdmitted, match="inside its time windows") as refused:
        envelope_grant_check_locked(item=item, executor=executor, now_ms=monday_8)
    assert refused.value.extra == {"limit": "window", "retry_after_ms": 3_600_000}
    envelope_grant_check_locked(item=item, executor=executor, now_ms=monday_8 + 3_600_000)
