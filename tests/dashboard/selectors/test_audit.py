"""leaseboard.dashboard.selectors.audit on real PostgreSQL: the audit log newest first,
filtered by actor, action prefix and UTC day, keyset-paged on `seq`, each entry's object
named (an agent by name with a link to its page, a person by username, a lease by its
work key and epoch) instead of its id."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.core.services.leases import lease_revoke
from leaseboard.dashboard.selectors.audit import AuditFilters, audit_log, name_objects

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fast_passwords"),
]


def _revoke(lease, who) -> None:  # type: ignore[no-untyped-def]
    lease_revoke(
        lease_id=lease.id, actor=Actor.human(who), reason_category="misbehaving", reason_text="x"
    )


def test_newest_first_and_each_object_named(scene, people):  # type: ignore[no-untyped-def]
    _revoke(scene.lease, people.operator)
    page = audit_log()
    assert [e.seq for e in page.entries] == sorted((e.seq for e in page.entries), reverse=True)
    by_action = {r.entry.action: r for r in page.rows}
    created = by_action["agent.create"]
    assert created.object_label == scene.agent.name
    assert created.object_link == ("dashboard:executor", scene.agent.id)
    revoked = by_action["lease.revoke"]
    assert revoked.object_label == f"lease on {scene.key} @{scene.lease.epoch}"
    assert revoked.object_link is None


def test_filters_by_actor_action_prefix_and_day(scene, people):  # type: ignore[no-untyped-def]
    _revoke(scene.lease, people.operator)
    mine = audit_log(AuditFilters(actor=people.operator.username))
    assert [e.action for e in mine.entries] == ["lease.revoke"]
    assert [e.action for e in audit_log(AuditFilters(action="agent.")).entries] == ["agent.create"]
    assert audit_log(AuditFilters(action="lease.revoke")).entries == mine.entries
    today = datetime.fromtimestamp(mine.entries[0].at_ms / 1000, UTC).strftime("%Y-%m-%d")
    assert len(audit_log(AuditFilters(date_from=today, date_to=today)).entries) == 2
    assert audit_log(AuditFilters(date_to="2001-01-01")).entries == []
    # A day that is not a date filters nothing out, and a NUL matches nothing stored.
    assert len(audit_log(AuditFilters(date_from="yesterday")).entries) == 2
    assert audit_log(AuditFilters.from_query({"actor": "ol\x00ga"})).entries == []


def test_keyset_pages_meet_without_overlap(agent):  # type: ignore[no-untyped-def]
    for _ in range(5):
        agent()
    first = audit_log(size=2)
    assert len(first.entries) == 2 and first.next_cursor
    second = audit_log(AuditFilters(cursor=first.next_cursor), size=2)
    third = audit_log(AuditFilters(cursor=second.next_cursor), size=2)
    seqs = [e.seq for p in (first, second, third) for e in p.entries]
    assert seqs == sorted(AuditEntry.objects.values_list("seq", flat=True), reverse=True)
    assert third.next_cursor == ""


def test_the_query_keeps_only_what_is_set(db):  # type: ignore[no-untyped-def]
    filters = AuditFilters.from_query({"actor": " olga ", "date_from": "2026-01-01xx", "x": "1"})
    assert filters.query() == {"actor": "olga", "date_from": "2026-01-01"}
    assert filters.query(cursor=40) == {"actor": "olga", "date_from": "2026-01-01", "cursor": "40"}


def test_people_and_unknown_agents_are_named_without_a_lookup_per_entry(
    people, django_assert_num_queries
):  # type: ignore[no-untyped-def]
    entries = [
        AuditEntry(action="user.update", object_type="user", object_id=str(people.approver.pk)),
        AuditEntry(action="agent.rotate", object_type="executor", object_id="999999"),
        AuditEntry(action="alert.ack", object_type="alert_group", object_id="0:lease_expired"),
        AuditEntry(action="queue.create", object_type="queue", object_id="refunds"),
    ]
    with django_assert_num_queries(2):
        rows = name_objects(entries)
    assert [r.object_label for r in rows] == [
        f"person {people.approver.username}",
        "executor 999999",
        "no agent's lease expired alerts",
        "queue refunds",
    ]
