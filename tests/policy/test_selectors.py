"""leaseboard.policy.selectors on real PostgreSQL: what the settings pages read. Queues
with their counts, one queue's page with its rules in order and the proposal waiting on
them, the global rules, people with their roles, break-glass and queue scopes, agents
with their live leases, recipients without their secrets, proposals pending first, and
the configuration history keyset-paged newest first."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, RoleScope
from leaseboard.core.services.leases import lease_release
from leaseboard.core.services.recipients import recipient_webhook_set
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy import selectors
from leaseboard.policy.services import queues, rules
from tests.builders import admit, grant_break_glass, leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

BIG = RuleSpec(name="big", kind="payment.*", decision="require_approval")


@pytest.fixture
def admin() -> Actor:
    return Actor.human(make_user("ada-sel", "admin"))


def test_queues_overview_counts_rules_open_work_and_pending_proposals(admin, settings):  # type: ignore[no-untyped-def]
    queues.queue_create(name="payments", values={}, actor=admin)
    rules.rule_set_change(queue_name="payments", rules=[BIG], default="allow", actor=admin)
    admit("sel-1", queue="payments")
    admit("sel-2", queue="payments")
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    rules.rule_set_change(queue_name="payments", rules=[], default="deny", actor=admin)
    by_name = {q.name: q for q in selectors.queues_overview()}
    assert list(by_name) == sorted(by_name) and "default" in by_name
    payments = by_name["payments"]
    assert (payments.n_rules, payments.n_admitted, payments.n_waiting, payments.n_pending) == (
        1,
        2,
        0,
        1,
    )
    assert selectors.queue_names() == list(by_name)


def test_a_queue_page_has_its_rules_in_order_and_its_waiting_proposal(admin, settings):  # type: ignore[no-untyped-def]
    assert selectors.queue_page("nowhere") is None
    queues.queue_create(name="refunds", values={}, actor=admin)
    small = RuleSpec(name="small", kind="payment.refund", decision="allow")
    rules.rule_set_change(queue_name="refunds", rules=[small, BIG], default="deny", actor=admin)
    page = selectors.queue_page("refunds")
    assert page is not None and page.pending is None
    assert [r.name for r in page.rules] == ["small", "big"]
    assert page.settings == queues.queue_snapshot(page.queue)
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    change = rules.rule_set_change(queue_name="refunds", rules=[], default="deny", actor=admin)
    page = selectors.queue_page("refunds")
    assert page is not None and page.pending is not None
    assert page.pending.pk == change.proposal.pk


def test_the_global_page_has_the_rules_for_every_queue(admin):  # type: ignore[no-untyped-def]
    before = selectors.global_page()
    rules.rule_set_change(queue_name=None, rules=[BIG], default="allow", actor=admin)
    page = selectors.global_page()
    assert [r.name for r in page.rules] == ["big"]
    assert page.version > before.version and page.pending is None


def test_people_with_roles_break_glass_and_scopes(admin):  # type: ignore[no-untyped-def]
    olga = make_user("olga-sel", "operator", "approver")
    grant_break_glass(olga)
    RoleScope.objects.create(user=olga, role="approver", queues=["refunds", "payments"])
    by_name = {p.username: p for p in selectors.people_list()}
    person = by_name["olga-sel"]
    assert person.roles == ["approver", "operator"] and person.break_glass
    assert person.scopes == "approver:payments approver:refunds"
    assert person.active and not person.superuser
    assert by_name["ada-sel"].roles == ["admin"] and not by_name["ada-sel"].break_glass


def test_agents_with_their_live_leases_and_recipients_without_secrets(agent, recipient):  # type: ignore[no-untyped-def]
    busy, _ = agent("busy-sel")
    idle, _ = agent("idle-sel")
    leased_item(busy, key="sel-live")
    done = leased_item(idle, key="sel-done")
    lease_release(lease_id=done.id, executor=idle, epoch=done.epoch)
    live = {e.name: e.n_live for e in selectors.credentials_list()}
    assert (live["busy-sel"], live["idle-sel"]) == (1, 0)
    made, _ = recipient("ledger-sel")
    recipient_webhook_set(name="ledger-sel", url="https://ledger.example/epochs")
    [shown] = [r for r in selectors.recipients_list() if r.name == "ledger-sel"]
    assert shown.webhook_url == "https://ledger.example/epochs"
    assert "webhook_secret" in shown.get_deferred_fields()
    assert selectors.recipient_name(made.pk) == "ledger-sel"
    assert selectors.recipient_name(2**31 - 1) is None


def test_pending_proposals_come_first_then_the_recent_decided(admin, settings):  # type: ignore[no-untyped-def]
    from leaseboard.policy.services import changes

    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    queues.queue_create(name="a-sel", values={}, actor=admin)
    queues.queue_create(name="b-sel", values={}, actor=admin)
    first = rules.rule_set_change(queue_name="a-sel", rules=[BIG], default="allow", actor=admin)
    second = rules.rule_set_change(queue_name="b-sel", rules=[BIG], default="allow", actor=admin)
    changes.change_reject(change_id=first.proposal.pk, actor=admin, note="withdrawn")
    listed = selectors.changes_list()
    assert [c.pk for c in listed] == [second.proposal.pk, first.proposal.pk]
    assert [c.status for c in listed] == ["pending", "withdrawn"]  # by its proposer


def test_the_configuration_history_is_newest_first_in_pages(admin, scene, people):  # type: ignore[no-untyped-def]
    from leaseboard.core.services.leases import lease_revoke

    for n in range(selectors.HISTORY_PAGE + 3):
        queues.queue_create(name=f"h-{n}", values={}, actor=admin)
    lease_revoke(  # audited, but not configuration
        lease_id=scene.lease.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="loops",
    )
    assert AuditEntry.objects.filter(action="lease.revoke").exists()
    first = selectors.config_history()
    assert len(first.entries) == selectors.HISTORY_PAGE and first.next_cursor
    assert all(not e.action.startswith("lease.") for e in first.entries)
    seqs = [e.seq for e in first.entries]
    assert seqs == sorted(seqs, reverse=True)
    rest = selectors.config_history(first.next_cursor)
    assert rest.next_cursor == "" and len(rest.entries) >= 3
    assert max(e.seq for e in rest.entries) < min(seqs)
    assert selectors.config_history("not-a-cursor").entries == first.entries
