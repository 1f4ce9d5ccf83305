"""Ending leases (leaseboard.core.services.leases.ending), on real PostgreSQL: a release
is a compare-and-set that a retry answers as a success and that never frees a newer
grant; an operator's revoke records its structured reason, which the holder's next renew
is told; a revoke without a known category or a text is refused with nothing written."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Lease, LeaseEvent
from leaseboard.core.services.leases.ending import lease_release, lease_revoke, revoke_reason
from leaseboard.core.services.leases.grants import lease_acquire
from leaseboard.core.services.leases.renewals import lease_renew
from leaseboard.domain.errors import LeaseboardError, LeaseRevoked, ValidationFailed
from tests.builders import leased_item, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_release_ends_the_lease_once_and_a_retry_answers_the_same(agent) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="end-1")
    ended = lease_release(lease_id=lease.id, executor=executor, epoch=1)
    again = lease_release(lease_id=lease.id, executor=executor, epoch=1)
    assert ended.state == again.state == Lease.State.RELEASED
    kinds = list(LeaseEvent.objects.filter(lease=lease).values_list("kind", flat=True))
    assert kinds.count(LeaseEvent.Kind.RELEASED) == 1


def test_a_late_release_of_an_old_epoch_never_frees_the_successors_grant(agent) -> None:
    first, _ = agent()
    lease = leased_item(first, key="end-2")
    lease_release(lease_id=lease.id, executor=first, epoch=1)
    second, _ = agent()
    successor = lease_acquire(work_key="end-2", executor=second).lease
    with pytest.raises(LeaseboardError):
        lease_release(lease_id=successor.id, executor=first, epoch=1)
    successor.refresh_from_db()
    assert successor.state in {"active", "jeopardy"} and successor.epoch == 2


def test_a_revoke_records_its_reason_and_the_holders_next_renew_is_told_it(agent) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="end-3")
    operator = Actor.human(make_user("rita", "operator"))
    lease_revoke(
        lease_id=lease.id, actor=operator, reason_category="stuck", reason_text="  no progress "
    )
    lease.refresh_from_db()
    assert lease.state == Lease.State.REVOKED
    assert lease.end_reason == revoke_reason("stuck", "no progress") == "stuck: no progress"
    with pytest.raises(LeaseRevoked) as told:
        lease_renew(lease_id=lease.id, executor=executor, epoch=1)
    assert "no progress" in told.value.detail


@pytest.mark.parametrize(
    ("category", "text", "param"),
    [("bored", "a reason", "reason_category"), ("stuck", "   ", "reason_text")],
)
def test_a_revoke_without_a_known_category_and_a_text_changes_nothing(
    agent, category, text, param
) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key=f"end-4-{param}")
    operator = Actor.human(make_user("rhea", "operator"))
    with pytest.raises(ValidationFailed) as refused:
        lease_revoke(lease_id=lease.id, actor=operator, reason_category=category, reason_text=text)
    assert refused.value.extra["param"] == param
    lease.refresh_from_db()
    assert lease.state == Lease.State.ACTIVE
