"""Operator revoke with a structured reason, bulk revoke, and quarantine (issue 12 item 5):
through the core services, with the agent's answers read through the real API."""

from __future__ import annotations

import pytest
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.locking import work_item_locked_by
from leaseboard.core.models import AuditEntry, BulkRevoke, Executor, Lease, LeaseEvent, Quarantine
from leaseboard.core.services import leases as ls
from leaseboard.core.services import supervision
from leaseboard.core.services.leases.grants import holder_active_checked
from leaseboard.domain.errors import (
    Forbidden,
    IdempotencyConflict,
    Unauthenticated,
    ValidationFailed,
)
from tests.builders import admit, leased_item, make_user
from tests.locking import race_on_a_lock

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def operator(db):  # type: ignore[no-untyped-def]
    return Actor.human(make_user("olivia", "operator"))


def _renew(api, lease: Lease, token: str):  # type: ignore[no-untyped-def]
    return api.post(f"/api/v1/leases/{lease.id}/renew", {"epoch": lease.epoch}, token)


# -- one revoke ---------------------------------------------------------------------------


def test_a_revoked_agent_is_told_the_category_and_the_text_at_its_next_renew(api, agent, operator):
    executor, token = agent("refund-bot")
    lease = leased_item(executor, key="refund-1")
    ls.lease_revoke(
        lease_id=lease.id,
        actor=operator,
        reason_category="misbehaving",
        reason_text="sends each refund twice",
        request_id="rq-1",
    )
    r = _renew(api, lease, token)
    assert r.status_code == 409
    assert r.json_body["code"] == "lease_revoked"
    assert r.json_body["reason"] == "misbehaving: sends each refund twice"
    event = LeaseEvent.objects.get(lease=lease, kind="revoked")
    assert event.detail["reason_category"] == "misbehaving"
    assert event.detail["reason_text"] == "sends each refund twice"
    entry = AuditEntry.objects.get(action="lease.revoke")
    assert (entry.actor_name, entry.actor_role, entry.request_id) == ("olivia", "operator", "rq-1")
    assert entry.after["reason_category"] == "misbehaving"
    # The work is back in the pool: the next grant is a new epoch.
    other, _ = agent("other-bot")
    assert ls.lease_acquire(work_key="refund-1", executor=other).lease.epoch == 2


@pytest.mark.parametrize(
    ("category", "text", "param"),
    [
        ("", "why", "reason_category"),
        ("nonsense", "why", "reason_category"),
        ("stuck", " ", "reason_text"),
    ],
)
def test_a_revoke_without_a_structured_reason_writes_nothing(
    agent, operator, category, text, param
):
    executor, _ = agent()
    lease = leased_item(executor)
    with pytest.raises(ValidationFailed) as err:
        ls.lease_revoke(
            lease_id=lease.id, actor=operator, reason_category=category, reason_text=text
        )
    assert err.value.extra["param"] == param
    lease.refresh_from_db()
    assert lease.state == "active"
    assert not AuditEntry.objects.filter(action="lease.revoke").exists()


# -- bulk -----------------------------------------------------------------------------------


def test_a_bulk_revoke_answers_per_lease_and_a_retry_answers_the_same(api, agent, operator):
    executor, token = agent("fleet-7")
    live = [leased_item(executor, key=f"bulk-{i}") for i in range(3)]
    ls.lease_release(lease_id=live[1].id, executor=executor, epoch=1)
    asked = [str(live[2].id), str(live[1].id), "not-a-lease", str(live[0].id)]
    ask = {
        "lease_ids": asked,
        "actor": operator,
        "reason_category": "incident",
        "reason_text": "payments outage: stop the fleet",
        "idempotency_key": "k-1",
    }
    bulk = supervision.leases_revoke_bulk(**ask)
    outcomes = [(r["lease_id"], r["ok"], r["code"], r["work_key"]) for r in bulk.results]
    assert outcomes == [
        (str(live[2].id), True, None, "bulk-2"),
        (str(live[1].id), False, "lease_released", "bulk-1"),
        ("not-a-lease", False, "not_found", ""),
        (str(live[0].id), True, None, "bulk-0"),
    ]
    for lease in (live[0], live[2]):
        r = _renew(api, lease, token)
        assert r.json_body["code"] == "lease_revoked"
        assert r.json_body["reason"] == "incident: payments outage: stop the fleet"
    audits = AuditEntry.objects.filter(action="lease.revoke").count()
    assert audits == 2

    again = supervision.leases_revoke_bulk(**ask)  # the same request, retried
    assert again.id == bulk.id and again.results == bulk.results
    assert AuditEntry.objects.filter(action="lease.revoke").count() == audits
    with pytest.raises(IdempotencyConflict):
        supervision.leases_revoke_bulk(
            lease_ids=asked[:1],
            actor=operator,
            reason_category="incident",
            reason_text="payments outage: stop the fleet",
            idempotency_key="k-1",
        )


def test_a_manager_may_not_revoke_in_bulk_and_nothing_is_recorded(agent):
    executor, _ = agent()
    lease = leased_item(executor)
    manager = Actor.human(make_user("mia", "manager"))
    with pytest.raises(Forbidden):
        supervision.leases_revoke_bulk(
            lease_ids=[lease.id],
            actor=manager,
            reason_category="stuck",
            reason_text="r",
            idempotency_key="k",
        )
    assert not BulkRevoke.objects.exists()
    lease.refresh_from_db()
    assert lease.state == "active"


# -- quarantine -----------------------------------------------------------------------------


def test_quarantine_revokes_every_lease_and_the_token_gets_401_until_lifted(
    api, agent, operator, django_capture_on_commit_callbacks
):
    bad, token = agent("loopy")
    good, good_token = agent("steady")
    mine = [leased_item(bad, key=f"q-{i}") for i in range(2)]
    theirs = leased_item(good, key="q-other")
    assert api.get("/api/v1/work-items/q-0", token).status_code == 200  # token now cached

    with django_capture_on_commit_callbacks(execute=True):  # forgets the cached token
        result = supervision.agent_quarantine(
            executor_id=bad.id,
            actor=operator,
            reason_category="misbehaving",
            reason_text="retries refunds in a loop",
        )
    assert result.changed and {r.work_key for r in result.revoked} == {"q-0", "q-1"}
    for lease in mine:
        lease.refresh_from_db()
        assert lease.state == "revoked"
        assert lease.end_reason == "agent quarantined: misbehaving: retries refunds in a loop"
    theirs.refresh_from_db()
    assert theirs.state == "active"
    assert not Executor.objects.get(id=bad.id).is_active
    r = _renew(api, mine[0], token)
    assert r.status_code == 401 and r.json_body["code"] == "unauthenticated"
    assert _renew(api, theirs, good_token).status_code == 200
    actions = list(AuditEntry.objects.order_by("seq").values_list("action", flat=True))
    assert actions == [
        "agent.create",
        "agent.create",
        "lease.revoke",
        "lease.revoke",
        "agent.quarantine",
    ]

    # A second click changes nothing and records nothing.
    again = supervision.agent_quarantine(
        executor_id=bad.id, actor=operator, reason_category="misbehaving", reason_text="again"
    )
    assert not again.changed and again.quarantine.id == result.quarantine.id
    assert AuditEntry.objects.count() == len(actions)

    # Only an approver lifts it; then the agent acquires again, at a new epoch.
    with pytest.raises(Forbidden):
        supervision.agent_quarantine_lift(executor_id=bad.id, actor=operator, note="ok now")
    approver = Actor.human(make_user("abe", "approver"))
    supervision.agent_quarantine_lift(executor_id=bad.id, actor=approver, note="fixed in v2")
    q = Quarantine.objects.get()
    assert q.lifted_by.username == "abe" and q.lift_note == "fixed in v2"
    r = api.post("/api/v1/work-items/q-0/lease", {}, token)
    assert r.status_code == 201 and r.json_body["epoch"] == 2
    assert AuditEntry.objects.filter(action="agent.quarantine_lift").count() == 1


def test_a_quarantined_agent_cannot_be_granted_work_even_with_a_cached_credential(agent, operator):
    bad, _ = agent("stale-cache")
    admit("cached-1")
    supervision.agent_quarantine(
        executor_id=bad.id, actor=operator, reason_category="incident", reason_text="stop"
    )
    # `bad` is the executor row as a token cache (or a request in flight) still holds it.
    assert bad.is_active
    with pytest.raises(Unauthenticated):
        ls.lease_acquire(work_key="cached-1", executor=bad)
    assert not Lease.objects.filter(work_item__key="cached-1").exists()


def test_only_agents_are_quarantined(agent, operator):
    from leaseboard.core.services.executors import human_executor_for_user_id

    person = human_executor_for_user_id(operator.user_id)
    with pytest.raises(ValidationFailed):
        supervision.agent_quarantine(
            executor_id=person.id, actor=operator, reason_category="other", reason_text="x"
        )
    assert not Quarantine.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_grant_in_flight_when_the_quarantine_starts_is_revoked_by_it(agent):
    """A grant that read the agent as active before the quarantine took its row commits
    first; the quarantine then finds that lease and revokes it. Either way round, the agent
    ends with no live lease."""
    bad, _ = agent("racer")
    admit("race-1")
    operator = Actor.human(make_user("olga", "operator"))
    out: dict = {}

    def grant_slowly(checked, finish):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            item = work_item_locked_by(key="race-1")
            holder_active_checked(bad, "acquire")  # the share lock on the agent's row
            checked.set()
            finish.wait(10)
            from leaseboard.core.clock import db_now_ms

            out["lease"] = ls.lease_grant_locked(item=item, holder=bad, now_ms=db_now_ms())

    def quarantine():  # type: ignore[no-untyped-def]
        out["q"] = supervision.agent_quarantine(
            executor_id=bad.id, actor=operator, reason_category="incident", reason_text="x"
        )

    race_on_a_lock(grant_slowly, quarantine)  # the quarantine waits on the agent's row
    assert [r.lease_id for r in out["q"].revoked] == [str(out["lease"].id)]
    assert not Lease.objects.filter(holder=bad, state__in=["active", "jeopardy"]).exists()
