"""leaseboard.dashboard.selectors.revocations on real PostgreSQL: the bulk revoke's
confirmation lists the live leases of the picked work keys in the order picked (blank,
repeated and unleased keys dropped), and "select all N matching" counts the agents' live
leases the live page's filters select, never a person's standing."""

from __future__ import annotations

import pytest

from leaseboard.core.services.leases import lease_release
from leaseboard.dashboard.selectors.revocations import PICK_LIMIT, leases_matching, leases_to_revoke
from tests.builders import admit, age_lease, human_standing, leased_item

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fast_passwords"),
]


def test_picked_keys_in_the_order_picked_with_the_unleased_dropped(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    for key in ("rv-a", "rv-b", "rv-c"):
        leased_item(executor, key=key)
    ended = leased_item(executor, key="rv-ended")
    lease_release(lease_id=ended.id, executor=executor, epoch=ended.epoch)
    admit("rv-free")
    rows = leases_to_revoke(keys=["rv-c", " ", "rv-a", "rv-c", "rv-free", "rv-ended", "nope"])
    assert [r.lease.work_item.key for r in rows] == ["rv-c", "rv-a"]
    assert leases_to_revoke(keys=["", "  "]) == []


def test_matching_counts_agents_live_leases_and_never_standing(agent):  # type: ignore[no-untyped-def]
    from leaseboard.core.services.executors import human_executor_for_user_id
    from tests.builders import make_user

    executor, _ = agent("matcher")
    for key in ("mt-1", "mt-2"):
        leased_item(executor, key=key)
    person = human_executor_for_user_id(make_user("hana", "operator").id)
    admit("mt-human")
    human_standing(person, "mt-human")
    matching = leases_matching({})
    assert matching.total == 2 and not matching.capped
    assert [r.lease.work_item.key for r in matching.rows] == ["mt-1", "mt-2"]


def test_the_filters_select_and_the_query_keeps_only_theirs(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent("fine")
    late_holder, _ = agent("late")
    leased_item(executor, key="fl-ok")
    late = leased_item(late_holder, key="fl-late")
    age_lease(late.id, late.jeopardy_after_ms + 1)
    jeopardy = leases_matching({"certainty": "jeopardy", "page": "3"})
    assert [r.lease.work_item.key for r in jeopardy.rows] == ["fl-late"]
    assert jeopardy.query == {"certainty": "jeopardy"}
    active = leases_matching({"certainty": "active"})
    assert [r.lease.work_item.key for r in active.rows] == ["fl-ok"]
    assert leases_matching({"certainty": "ended"}).total == 0
    assert [r.lease.work_item.key for r in leases_matching({"q": "fl-ok"}).rows] == ["fl-ok"]


def test_the_count_is_capped_one_past_the_pick_limit(agent):  # type: ignore[no-untyped-def]
    from tests.builders import bulk_leases

    executor, _ = agent()
    bulk_leases(
        PICK_LIMIT + 5, prefix="cap", holder=executor, jeopardy_in_ms=60_000, expires_in_ms=120_000
    )
    matching = leases_matching({})
    assert matching.capped and matching.total == PICK_LIMIT + 1
    assert len(matching.rows) == PICK_LIMIT
