"""Hold by query (issue 28, point 7): each lease by the one hold, an outcome per lease, the
bulk and every hold audited in its transaction, gated by the authority, bounded."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Lease, Queue, RoleScope, WorkItem
from leaseboard.core.services import holds
from leaseboard.core.services.bulk import BULK_MAX
from leaseboard.core.services.leases import lease_release
from leaseboard.domain.errors import Forbidden, ValidationFailed
from tests.builders import leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _hold(actor: Actor, ids: list) -> holds.BulkResult:  # type: ignore[type-arg]
    return holds.leases_hold_bulk(
        lease_ids=[str(i) for i in ids],
        actor=actor,
        reason_category="misbehaving",
        reason_text="refunds look doubled",
        query={"holder": "loopy"},
        request_id="rq-bulk",
    )


def test_it_holds_each_lease_and_reports_the_ones_it_could_not(agent):
    op = Actor.human(make_user("olga", "operator"))
    bot, _ = agent("loopy")
    leases = [leased_item(bot, key=f"loop-{i}") for i in range(3)]
    held_before = leases[1]
    holds.lease_hold(lease_id=held_before.id, actor=op, reason_category="stuck", reason_text="mine")
    ended = leased_item(bot, key="loop-ended")
    lease_release(lease_id=ended.id, executor=bot, epoch=ended.epoch)

    bulk = _hold(op, [lease.id for lease in leases] + [ended.id, "not-a-lease"])

    by_id = {o.id: o for o in bulk.outcomes}
    assert [o.id for o in bulk.outcomes][:3] == [str(lease.id) for lease in leases]
    assert by_id[str(leases[0].id)].ok and by_id[str(leases[2].id)].ok
    refused = by_id[str(held_before.id)]
    assert not refused.ok and "already on hold" in refused.detail
    assert refused.work_key == "loop-1" and refused.about == "loopy"
    assert not by_id[str(ended.id)].ok and by_id[str(ended.id)].code
    assert by_id["not-a-lease"].code == "not_found"
    assert bulk.succeeded == 2
    for key in ("loop-0", "loop-2"):
        item = WorkItem.objects.get(key=key)
        assert item.hold_reason == "misbehaving: refunds look doubled"
        assert Lease.objects.get(work_item=item, state="active").held_at_ms is not None
    assert WorkItem.objects.get(key="loop-1").hold_reason == "stuck: mine"  # untouched
    # Each hold audited as a hold; the bulk with the filter and every outcome.
    assert AuditEntry.objects.filter(action="lease.hold", request_id="rq-bulk").count() == 2
    entry = AuditEntry.objects.get(action="lease.hold_bulk")
    assert entry.before["query"] == {"holder": "loopy"}
    assert entry.after["succeeded"] == 2 and len(entry.after["results"]) == 5


def test_people_without_the_hold_act_are_refused_before_anything(agent):
    bot, _ = agent("loopy")
    lease = leased_item(bot, key="m-1")
    with pytest.raises(Forbidden):
        _hold(Actor.human(make_user("mia", "manager")), [lease.id])
    assert not AuditEntry.objects.filter(action__startswith="lease.hold").exists()


def test_a_person_scoped_to_a_queue_holds_only_there(agent):
    Queue.objects.create(name="payments")
    user = make_user("pat", "operator")
    RoleScope.objects.create(user=user, role="operator", queues=["payments"])
    bot, _ = agent("loopy")
    mine = leased_item(bot, key="pay-1", queue="payments")
    other = leased_item(bot, key="dflt-1")
    bulk = _hold(Actor.human(user), [mine.id, other.id])
    assert [o.ok for o in bulk.outcomes] == [True, False]
    assert bulk.outcomes[1].code == "forbidden"  # in its queue: not this person's
    assert WorkItem.objects.get(key="dflt-1").held_at_ms is None


def test_a_bulk_is_bounded_and_needs_a_reason(agent):
    op = Actor.human(make_user("olga", "operator"))
    with pytest.raises(ValidationFailed, match=f"at most {BULK_MAX}"):
        _hold(op, [f"id-{i}" for i in range(BULK_MAX + 1)])
    with pytest.raises(ValidationFailed, match="select at least one"):
        _hold(op, [])
    with pytest.raises(ValidationFailed):
        holds.leases_hold_bulk(
            lease_ids=["x"], actor=op, reason_category="misbehaving", reason_text=" "
        )
