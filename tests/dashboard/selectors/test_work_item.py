"""leaseboard.dashboard.selectors.work_item on real PostgreSQL: one work item's page, its
leases newest epoch first with the live one picked out, the renewal history of the lease
asked for (the newest otherwise), its effects and alerts; a key no work item has, or one no
stored key could hold, has no page."""

from __future__ import annotations

import pytest

from leaseboard.core.services.alerts import alerts_open, lease_alert
from leaseboard.core.services.leases import lease_acquire, lease_release, lease_renew
from leaseboard.dashboard.selectors.work_item import renewal_history, work_item_page
from tests.builders import admit, effect_under, leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_no_page_for_an_unknown_or_unstorable_key(db):  # type: ignore[no-untyped-def]
    assert work_item_page(key="wi-none") is None
    assert work_item_page(key="bad\x00key") is None


def test_an_admitted_item_without_leases(db):  # type: ignore[no-untyped-def]
    admit("wi-free")
    page = work_item_page(key="wi-free")
    assert page is not None and page.item.key == "wi-free"
    assert page.leases == [] and page.live is None and page.renewals is None
    assert page.fenced_until_ms == 0 and page.fenced_in_ms == 0


def test_leases_newest_first_and_the_chosen_leases_renewals(agent):  # type: ignore[no-untyped-def]
    first_holder, _ = agent()
    second_holder, _ = agent()
    first = leased_item(first_holder, key="wi-1")
    for _ in range(2):
        lease_renew(lease_id=first.id, executor=first_holder, epoch=first.epoch)
    lease_release(lease_id=first.id, executor=first_holder, epoch=first.epoch)
    second = lease_acquire(work_key="wi-1", executor=second_holder).lease
    page = work_item_page(key="wi-1")
    assert page is not None
    assert [r.lease.id for r in page.leases] == [second.id, first.id]
    assert page.live is not None and page.live.lease.id == second.id
    assert page.renewals is not None and page.renewals.lease.id == second.id
    older = work_item_page(key="wi-1", lease_id=str(first.id))
    assert older is not None and older.renewals is not None
    history = older.renewals
    assert history.lease.id == first.id and len(history.times) == 2
    assert len(history.gaps) == 2 and all(g.gap_ms >= 0 for g in history.gaps)
    assert history.threshold_ms == first.jeopardy_after_ms and history.ttl_ms == first.ttl_ms
    # An unknown lease id falls back to the newest lease.
    fallback = work_item_page(key="wi-1", lease_id="not-a-lease")
    assert fallback is not None and fallback.renewals is not None
    assert fallback.renewals.lease.id == second.id


def test_effects_and_alerts_of_the_item_only(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    lease = leased_item(executor, key="wi-fx")
    other = leased_item(executor, key="wi-other")
    effect = effect_under(lease, executor, "wi-fx-1", kind="ticket.comment", target="t-1")
    alerts_open([lease_alert(lease, "jeopardy", "late", due_at_ms=0, now_ms=0)])
    alerts_open([lease_alert(other, "jeopardy", "late", due_at_ms=0, now_ms=0)])
    page = work_item_page(key="wi-fx")
    assert page is not None
    assert [e.id for e in page.effects] == [effect.id]
    assert [a.work_item_id for a in page.alerts] == [lease.work_item_id]


def test_renewal_history_of_a_fresh_lease_is_empty(agent):  # type: ignore[no-untyped-def]
    executor, _ = agent()
    history = renewal_history(leased_item(executor, key="wi-fresh"))
    assert history.times == [] and history.gaps == []
