"""Takeover services on real PostgreSQL: the approval transaction, freshness, roles,
standing and its ends (compare-and-sets), commit-time approvals, bulk, expiry."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert, AuditEntry, Effect, Lease, WorkItem
from leaseboard.core.services import approvals, reconciliation
from leaseboard.core.services.effects import effect_propose, effect_report_outcome
from leaseboard.core.services.leases import lease_acquire, lease_renew
from leaseboard.domain.errors import (
    Forbidden,
    LeaseRevoked,
    NeedsReconciliation,
    StaleEpoch,
    TakeoverConflict,
    ValidationFailed,
)
from leaseboard.takeovers import services
from leaseboard.takeovers.models import Intervention, InterventionEvent, TakeoverRequest
from leaseboard.takeovers.services import approval, decisions
from tests.builders import (
    age_lease,
    effect_rules,
    grant_break_glass,
    leased_item,
    make_user,
    request_for,
)

pytestmark = pytest.mark.usefixtures("fast_passwords")

MIN = 60_000


def approve(req, user, **kw):  # type: ignore[no-untyped-def]
    return decisions.takeover_approve(
        request_pk=req.id, actor=Actor.human(user), note=kw.pop("note", "ok"), **kw
    )


def propose(scene, key: str, epoch=None, lease_id=None):  # type: ignore[no-untyped-def]
    return effect_propose(
        lease_id=lease_id or scene.lease.id,
        executor=scene.agent,
        epoch=epoch if epoch is not None else scene.lease.epoch,
        kind="payment.refund",
        target="order-7",
        idempotency_key=key,
    )


def test_approval_revokes_the_agent_and_grants_the_human_at_a_new_epoch(people, scene):
    Alert.objects.create(
        kind="jeopardy",
        dedupe_key="j:1",
        message="m",
        opened_at_ms=1,
        lease=scene.lease,
        work_item=scene.lease.work_item,
        epoch=scene.lease.epoch,
    )
    req = request_for(scene.key, people.operator, standing_ms=20 * MIN)
    iv = approve(req, people.approver, request_id="req-approve")

    old = Lease.objects.get(id=scene.lease.id)
    assert old.state == "revoked" and "stuck" in old.end_reason
    new = Lease.objects.get(id=iv.lease_id)
    assert (new.state, new.grant_kind, new.epoch) == ("active", "takeover", old.epoch + 1)
    assert new.holder.user == people.operator
    assert new.expires_at_ms - new.granted_at_ms == 20 * MIN
    assert WorkItem.objects.get(key=scene.key).epoch == new.epoch
    assert (iv.agent, iv.requested_by, iv.approved_by) == (
        scene.agent,
        people.operator,
        people.approver,
    )
    assert not Alert.objects.filter(work_item__key=scene.key, resolved_at_ms__isnull=True)
    entry = AuditEntry.objects.get(action="takeover.approve")
    assert (entry.actor_name, entry.actor_role, entry.request_id) == (
        people.approver.username,
        "approver",
        "req-approve",
    )
    assert entry.before["epoch"] == old.epoch and entry.after["epoch"] == new.epoch
    assert "agent loops" in entry.reason
    kinds = list(iv.events.order_by("id").values_list("kind", flat=True))
    assert kinds == ["requested", "approved", "revoked", "granted", "alerts_resolved"]


def test_the_old_holder_is_refused_at_once_after_approval_commits(people, scene):
    req = request_for(scene.key, people.operator)
    approve(req, people.approver)
    # Its very next calls, before any renewal: the effect first, then the renew.
    with pytest.raises(StaleEpoch):
        propose(scene, "after-takeover")
    with pytest.raises(LeaseRevoked) as err:
        lease_renew(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
    assert "takeover" in err.value.detail


def test_the_old_holder_is_refused_through_the_http_api(people, scene, api):
    req = request_for(scene.key, people.operator)
    approve(req, people.approver)
    lid, epoch = str(scene.lease.id), scene.lease.epoch
    effect = api.post(
        "/api/v1/effects",
        {"lease_id": lid, "epoch": epoch, "kind": "k", "target": "t", "idempotency_key": "h1"},
        scene.token,
    )
    assert effect.status_code == 409 and effect.json_body["code"] == "stale_epoch"
    renew = api.post(f"/api/v1/leases/{lid}/renew", {"epoch": epoch}, scene.token)
    assert renew.status_code == 409 and renew.json_body["code"] == "lease_revoked"


STEPS = [
    "lease_revoke_locked",
    "lease_grant_locked",
    "_intervention_open",
    "alerts_resolve",
    "timeline",
    "audited",
]


@pytest.mark.parametrize("step", STEPS)
def test_approval_is_atomic_whichever_step_fails(people, scene, monkeypatch, step):
    req = request_for(scene.key, people.operator)
    audit_before = AuditEntry.objects.count()
    item_before = WorkItem.objects.get(key=scene.key)

    def boom(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"injected failure in {step}")

    monkeypatch.setattr(approval, step, boom)
    with pytest.raises(RuntimeError, match="injected"):
        approve(req, people.approver)
    monkeypatch.undo()

    lease = Lease.objects.get(id=scene.lease.id)
    assert lease.state == "active" and lease.ended_at_ms is None
    assert WorkItem.objects.get(key=scene.key).epoch == item_before.epoch
    assert Lease.objects.filter(work_item__key=scene.key).count() == 1
    assert TakeoverRequest.objects.get(id=req.id).status == "pending"
    assert not Intervention.objects.exists() and not InterventionEvent.objects.exists()
    assert AuditEntry.objects.count() == audit_before
    # The agent still works; and the approval can then succeed in full.
    propose(scene, "still-mine")
    iv = approve(req, people.approver)
    assert iv.epoch == item_before.epoch + 1


def test_the_requester_may_not_approve_or_reject_their_own_request(people, scene):
    both = make_user("both-roles", "operator", "approver")
    req = request_for(scene.key, both)
    with pytest.raises(Forbidden):
        services.takeover_approve(request_pk=req.id, actor=Actor.human(both))
    with pytest.raises(Forbidden):
        services.takeover_reject(request_pk=req.id, actor=Actor.human(both), note="no")
    assert TakeoverRequest.objects.get(id=req.id).status == "pending"


def test_approving_after_the_epoch_moved_is_a_takeover_conflict(people, scene, agent):
    req = request_for(scene.key, people.operator)
    age_lease(scene.lease.id, scene.lease.ttl_ms + 1000)  # the agent's lease expires...
    other, _ = agent()
    lease_acquire(work_key=scene.key, executor=other)  # ...and another agent takes it
    with pytest.raises(TakeoverConflict) as err:
        approve(req, people.approver)
    assert err.value.code == "takeover_conflict"
    req.refresh_from_db()
    assert req.status == "conflict" and not Intervention.objects.exists()
    assert Lease.objects.get(work_item__key=scene.key, state="active").holder == other
    assert AuditEntry.objects.filter(action="takeover.approve_refused").count() == 1


def test_an_expired_lease_without_an_epoch_change_is_still_taken_over(people, scene):
    req = request_for(scene.key, people.operator)
    age_lease(scene.lease.id, scene.lease.ttl_ms + 1000)
    iv = approve(req, people.approver)
    assert iv.revoked_lease is None and iv.agent == scene.agent
    assert Lease.objects.get(id=scene.lease.id).state == "expired"


def test_requests_need_a_reason_and_bounded_standing(people, scene):
    with pytest.raises(ValidationFailed):
        request_for(scene.key, people.operator, reason_text="  ")
    with pytest.raises(ValidationFailed):
        request_for(scene.key, people.operator, reason_category="nope")
    with pytest.raises(ValidationFailed):
        request_for(scene.key, people.operator, standing_ms=services.standing_max_ms() + 1)
    request_for(scene.key, people.operator)
    with pytest.raises(ValidationFailed, match="already waiting"):
        request_for(scene.key, people.operator)
    assert TakeoverRequest.objects.count() == 1


def test_a_rejection_needs_a_note(people, scene):
    req = request_for(scene.key, people.operator)
    with pytest.raises(ValidationFailed):
        services.takeover_reject(request_pk=req.id, actor=Actor.human(people.approver), note="")
    services.takeover_reject(
        request_pk=req.id, actor=Actor.human(people.approver), note="the agent recovered"
    )
    req.refresh_from_db()
    assert req.status == "rejected" and req.decision_note == "the agent recovered"
    assert Lease.objects.get(id=scene.lease.id).state == "active"


def test_undecided_requests_expire_with_one_alert(people, scene, db_clock):
    req = request_for(scene.key, people.operator)
    assert services.takeover_requests_expire_due() == 0
    db_clock.advance(services.decision_ttl_ms() + 1)
    with pytest.raises(TakeoverConflict, match="expired"):
        approve(req, people.approver)
    assert services.takeover_requests_expire_due() == 0  # the approval attempt expired it
    req.refresh_from_db()
    assert req.status == "expired"


def test_the_sweep_step_expires_due_requests_once(people, scene, agent, db_clock):
    other, _ = agent()
    second = leased_item(other, key="exp-2")
    r1 = request_for(scene.key, people.operator)
    r2 = request_for(second.work_item.key, people.operator)
    db_clock.advance(services.decision_ttl_ms() + 1)
    assert services.takeover_requests_expire_due() == 2
    assert services.takeover_requests_expire_due() == 0
    assert set(TakeoverRequest.objects.values_list("status", flat=True)) == {"expired"}
    assert Alert.objects.filter(kind="takeover_expired").count() == 2
    assert {r1.id, r2.id} == set(
        Alert.objects.filter(kind="takeover_expired").values_list(
            "detail__takeover_request", flat=True
        )
    )


def _standing(people, scene):  # type: ignore[no-untyped-def]
    iv = approve(request_for(scene.key, people.operator), people.approver)
    return iv, iv.lease


def _ctx(people, iv, lease):  # type: ignore[no-untyped-def]
    return {
        "intervention_pk": iv.id,
        "actor": Actor.human(people.operator),
        "lease_id": lease.id,
        "epoch": lease.epoch,
    }


def test_hand_back_is_a_compare_and_set_and_a_retry_never_frees_a_newer_grant(people, scene, agent):
    iv, lease = _standing(people, scene)
    services.standing_hand_back(**_ctx(people, iv, lease), note="fixed the config")
    assert Lease.objects.get(id=lease.id).state == "released"
    other, _ = agent()
    newer = lease_acquire(work_key=scene.key, executor=other).lease
    assert newer.epoch == lease.epoch + 1
    again = services.standing_hand_back(**_ctx(people, iv, lease), note="retry")
    assert again.outcome == "handed_back"
    newer.refresh_from_db()
    assert newer.state == "active"
    assert AuditEntry.objects.filter(action="standing.hand_back").count() == 1
    # Assigning under the old (lease, epoch) cannot touch the newer grant either.
    with pytest.raises(Exception) as err:
        services.standing_assign(**_ctx(people, iv, lease), agent_name=other.name)
    assert err.value.code in {"stale_epoch", "lease_released"}
    newer.refresh_from_db()
    assert newer.state == "active"


def test_assign_grants_the_named_agent_a_new_epoch_and_a_retry_is_harmless(people, scene, agent):
    iv, lease = _standing(people, scene)
    other, token = agent()
    iv = services.standing_assign(
        **_ctx(people, iv, lease), agent_name=other.name, note="to the billing agent"
    )
    succ = iv.successor_lease
    assert (succ.holder, succ.grant_kind, succ.epoch) == (other, "assign", lease.epoch + 1)
    assert Lease.objects.get(id=lease.id).state == "released"
    services.standing_assign(**_ctx(people, iv, lease), agent_name=other.name)
    assert Lease.objects.filter(work_item__key=scene.key).count() == 3
    lease_renew(lease_id=succ.id, executor=other, epoch=succ.epoch)


def test_complete_is_refused_while_an_effect_is_unreconciled(people, scene):
    effect = propose(scene, "unknown-1")
    effect_report_outcome(effect_id=effect.id, executor=scene.agent, outcome="unknown")
    iv, lease = _standing(people, scene)
    with pytest.raises(NeedsReconciliation):
        services.standing_complete(**_ctx(people, iv, lease))
    with pytest.raises(NeedsReconciliation):
        services.standing_hand_back(**_ctx(people, iv, lease))
    reconciliation.effect_reconcile(
        effect_id=effect.id,
        actor=Actor.human(people.operator),
        resolution="confirmed",
        note="the refund shows in the ledger",
    )
    iv = services.standing_complete(**_ctx(people, iv, lease), note="done by hand")
    assert iv.outcome == "completed"
    assert WorkItem.objects.get(key=scene.key).status == "completed"
    assert AuditEntry.objects.filter(action="effect.reconcile", actor_role="operator").exists()


def test_only_the_grantee_acts_under_standing(people, scene):
    iv, lease = _standing(people, scene)
    other_op = make_user("other-op", "operator")
    with pytest.raises(Forbidden):
        services.standing_hand_back(**{**_ctx(people, iv, lease), "actor": Actor.human(other_op)})


def test_extend_within_the_maximum_keeps_the_epoch(people, scene, settings):
    settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS = 60 * MIN
    iv, lease = _standing(people, scene)
    ctx = _ctx(people, iv, lease)
    with pytest.raises(ValidationFailed):
        services.standing_extend(**ctx, extend_ms=45 * MIN, reason="")
    got = services.standing_extend(**ctx, extend_ms=45 * MIN, reason="needs more time")
    assert got.epoch == lease.epoch and got.expires_at_ms > lease.expires_at_ms
    capped = services.standing_extend(**ctx, extend_ms=600 * MIN, reason="a lot more")
    assert capped.expires_at_ms == capped.max_expires_at_ms == lease.granted_at_ms + 60 * MIN
    with pytest.raises(ValidationFailed, match="maximum"):
        services.standing_extend(**ctx, extend_ms=600 * MIN, reason="more")
    assert WorkItem.objects.get(key=scene.key).epoch == lease.epoch
    assert AuditEntry.objects.filter(action="standing.extend").count() == 2


def test_a_human_records_an_effect_under_their_own_epoch(people, scene):
    iv, lease = _standing(people, scene)
    effect = services.effect_record_human(
        **_ctx(people, iv, lease),
        kind="payment.refund",
        target="order-7",
        outcome="applied",
        detail="refunded in the console",
        idempotency_key="by-hand-1",
    )
    assert (effect.source, effect.epoch, effect.lease_id) == ("human", lease.epoch, lease.id)
    assert effect.decision == "authorized" and effect.outcome == "applied"
    same = services.effect_record_human(
        **_ctx(people, iv, lease),
        kind="payment.refund",
        target="order-7",
        outcome="applied",
        idempotency_key="by-hand-1",
    )
    assert same.id == effect.id
    with pytest.raises(StaleEpoch):
        services.effect_record_human(
            **{**_ctx(people, iv, lease), "epoch": lease.epoch - 1},
            kind="k",
            target="t",
            outcome="applied",
        )


def test_a_pending_effect_is_authorized_only_while_its_lease_is_current(people, scene):
    effect_rules(scene.lease.work_item.queue, ("payment.*", "require_approval"))
    first = propose(scene, "wait-1")
    second = propose(scene, "wait-2")
    assert first.decision == second.decision == "pending_approval"
    ok = approvals.effect_approve(effect_id=first.id, actor=Actor.human(people.approver))
    assert ok.decision == "authorized" and ok.fencing_token
    approve(request_for(scene.key, people.operator), people.approver)
    with pytest.raises(StaleEpoch):
        approvals.effect_approve(effect_id=second.id, actor=Actor.human(people.approver))
    second.refresh_from_db()
    assert (second.decision, second.refusal_code) == ("refused", "stale_epoch")
    assert AuditEntry.objects.filter(action="effect.approve_refused").count() == 1


def test_an_approver_rejects_a_pending_effect_with_a_note(people, scene):
    effect_rules(scene.lease.work_item.queue, default="require_approval")
    effect = propose(scene, "rej-1")
    # deliberate: refused without a note, then decided with one, as a takeover rejection is.
    with pytest.raises(ValidationFailed):
        approvals.effect_reject(effect_id=effect.id, actor=Actor.human(people.approver), note="")
    approvals.effect_reject(
        effect_id=effect.id, actor=Actor.human(people.approver), note="too large"
    )
    effect.refresh_from_db()
    assert effect.decision == "refused" and effect.refusal_code == "policy_denied"


def test_bulk_requests_report_per_item_and_honour_the_idempotency_key(people, scene, agent):
    other, _ = agent()
    second = leased_item(other, key="bulk-2")
    args = {
        "actor": Actor.human(people.operator),
        "reason_category": "incident",
        "reason_text": "payments outage",
        "idempotency_key": "bulk-abc",
    }
    bulk = services.takeover_bulk_request(
        work_keys=[scene.key, second.work_item.key, "no-such-item"], **args
    )
    outcomes = {r["work_key"]: r for r in bulk.results}
    assert outcomes[scene.key]["ok"] and outcomes["bulk-2"]["ok"]
    assert outcomes["no-such-item"] == {
        **outcomes["no-such-item"],
        "ok": False,
        "code": "not_found",
    }
    reasons = set(TakeoverRequest.objects.values_list("reason_text", flat=True))
    assert reasons == {"payments outage"}
    again = services.takeover_bulk_request(work_keys=[scene.key, "other"], **args)
    assert again.id == bulk.id and again.results == bulk.results
    assert TakeoverRequest.objects.count() == 2


def test_break_glass_needs_the_permission_and_is_flagged_for_review(people, scene):
    kwargs = {
        "work_key": scene.key,
        "actor": Actor.human(people.operator),
        "reason_category": "incident",
        "reason_text": "double refunds going out",
    }
    with pytest.raises(Forbidden):
        services.takeover_break_glass(**kwargs)
    assert not TakeoverRequest.objects.exists()
    grant_break_glass(people.operator)
    from django.contrib.auth import get_user_model

    op = get_user_model().objects.get(id=people.operator.id)  # fresh permission cache
    iv = services.takeover_break_glass(**{**kwargs, "actor": Actor.human(op)})
    assert iv.break_glass and iv.approved_by == op and iv.reviewed_at_ms is None
    assert Lease.objects.get(id=scene.lease.id).state == "revoked"
    with pytest.raises(Forbidden):
        services.intervention_review(intervention_pk=iv.id, actor=Actor.human(op), note="self")
    iv = services.intervention_review(
        intervention_pk=iv.id, actor=Actor.human(people.manager), note="justified"
    )
    assert iv.reviewed_by == people.manager


def test_a_lapsed_standing_is_marked_by_the_sweep_step(people, scene):
    iv, lease = _standing(people, scene)
    age_lease(lease.id, lease.ttl_ms + 1000)
    with pytest.raises(Exception) as err:
        services.standing_hand_back(**_ctx(people, iv, lease))
    assert err.value.code == "lease_expired"
    # Materialize the expiry as the lease sweep would, then our step marks the record.
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.services.leases import lease_expire_if_due_locked

    with transaction.atomic():
        locked = Lease.objects.select_for_update().get(id=lease.id)
        assert lease_expire_if_due_locked(locked, db_now_ms())
    assert services.takeover_requests_expire_due() == 1
    iv.refresh_from_db()
    assert iv.outcome == "lapsed" and iv.events.filter(kind="lapsed").exists()


def test_a_named_agent_can_be_the_grantee(people, scene, agent):
    other, _ = agent()
    req = request_for(scene.key, people.operator, grantee_agent=other.name)
    iv = approve(req, people.approver)
    assert iv.lease.holder == other and iv.outcome == "granted_to_agent"
    assert Effect.objects.count() == 0


def test_the_lease_sweep_runs_the_takeover_step(people, scene, db_clock):
    sweeps = pytest.importorskip("leaseboard.sweeps.services")
    req = request_for(scene.key, people.operator)
    db_clock.advance(services.decision_ttl_ms() + 1)
    report = sweeps.sweep_run()
    assert report.steps["takeovers"] >= 1
    req.refresh_from_db()
    assert req.status == "expired"


@pytest.mark.django_db
def test_the_live_page_counter_shows_pending_takeovers(people, scene):
    from leaseboard.dashboard.selectors.live import live_counters

    assert live_counters()[1].pending_takeovers == 0
    request_for(scene.key, people.operator)
    assert live_counters()[1].pending_takeovers == 1


@pytest.mark.django_db
def test_standing_longer_than_the_queues_agent_lifetime_is_granted(people, scene):
    """Human standing follows the takeover's limits, not the agents' lease policy."""
    from leaseboard.core.models import Queue

    Queue.objects.filter(work_items__key=scene.key).update(
        timing={"ttl_ms": 6_000, "renew_after_ms": 2_000, "max_lifetime_ms": 60_000}
    )
    req = request_for(scene.key, people.operator, standing_ms=30 * MIN)
    iv = approve(req, people.approver)
    new = Lease.objects.get(id=iv.lease_id)
    assert new.expires_at_ms - new.granted_at_ms == 30 * MIN


@pytest.mark.django_db(transaction=True)
def test_an_approval_that_waited_on_the_ending_lease_is_dated_after_that_end(people, scene):
    """The approval locked the item and read the clock, then waited for the agent's lease
    row while its holder was releasing it: the grant must not be dated before that
    release (the chaos run's one-live-holder check found a takeover 18 ms early)."""
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.services.leases import lease_end_locked
    from tests.locking import race_on_a_lock

    req = request_for(scene.key, people.operator)
    out: dict = {}

    def release_slowly(locked, finish):  # type: ignore[no-untyped-def]
        with transaction.atomic():
            lease = Lease.objects.select_for_update().get(id=scene.lease.id)
            locked.set()
            finish.wait(10)
            lease_end_locked(lease=lease, state="released", now_ms=db_now_ms(), reason="done")

    def approve_into() -> None:
        try:
            out["iv"] = approve(req, people.approver)
        except Exception as exc:  # surfaced by the assertions below
            out["error"] = exc

    # The approval waits on the lease's row; 50 ms lets the clock move past its first reading.
    race_on_a_lock(release_slowly, approve_into, settle_s=0.05)
    assert "error" not in out, out
    old = Lease.objects.get(id=scene.lease.id)
    new = Lease.objects.get(id=out["iv"].lease_id)
    assert old.state == "released" and new.epoch == old.epoch + 1
    assert new.granted_at_ms >= old.ended_at_ms
