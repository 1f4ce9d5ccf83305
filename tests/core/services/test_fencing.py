"""The fence between holders on real PostgreSQL (docs/design.md §5, "A token dies with the standing
it proves"): tokens bounded by the lease's expiry at issue, `fenced_until` on early ends,
the acquire waiting for it, grants made by people inheriting it, and a recipient that never
met the successor refusing a paused holder's late send. Time moves through the database
clock seam (`db_clock`), never by sleeping."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Effect, Lease, Queue, WorkItem
from leaseboard.core.services import effects as fx
from leaseboard.core.services import leases as ls
from leaseboard.core.services.fencing import fencing_public_keys
from leaseboard.domain import fencing
from leaseboard.domain.errors import LockDelay
from leaseboard.takeovers import services as takeovers
from leaseboard_recipient import InMemoryEpochGuard, MemoryReporter, TokenVerifier
from tests.builders import admit, effect_under, make_user, request_for

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("fast_passwords")]

TTL = 6_000


@pytest.fixture
def fenced_queue(db):  # type: ignore[no-untyped-def]
    """A queue whose agents may re-acquire over unreconciled effects, so the fence alone
    decides when the successor may act."""
    return Queue.objects.create(name="fenced", agent_acquire_needs_reconciliation=False)


def skew() -> int:
    return settings.LEASEBOARD_FENCING_SKEW_MS


def claims_of(token: str) -> fencing.FencingClaims:
    return fencing.verify_token(token, public_keys=fencing_public_keys(), now_ms=db_now_ms())


def propose(lease: Lease, executor, key: str) -> Effect:  # type: ignore[no-untyped-def]
    return effect_under(lease, executor, key, kind="payment.charge", target="acct-1")


def revoke(lease: Lease) -> Lease:
    approver = Actor.human(make_user(f"revoker-{lease.id.hex[:8]}", "approver"))
    return ls.lease_revoke(
        lease_id=lease.id,
        actor=approver,
        reason_category="misbehaving",
        reason_text="misbehaving",
    )


# -- tokens bounded by standing ----------------------------------------------------------


@pytest.mark.django_db
def test_an_effect_token_dies_when_the_lease_would_have_expired_at_issue(agent, db_clock):
    admit("tok-1", ttl_ms=TTL)
    a, _ = agent()
    lease = ls.lease_acquire(work_key="tok-1", executor=a).lease
    db_clock.advance(1_000)
    effect = propose(lease, a, "e-1")
    lease.refresh_from_db()
    token = claims_of(effect.fencing_token)
    assert token.effect_id == str(effect.id)
    assert token.expires_at_ms == lease.expires_at_ms == effect.token_expires_at_ms
    # A renewal moves the lease's expiry, never a token already issued.
    db_clock.advance(1_000)
    ls.lease_renew(lease_id=lease.id, executor=a, epoch=1)
    lease.refresh_from_db()
    assert lease.expires_at_ms >= token.expires_at_ms + 2_000
    assert claims_of(effect.fencing_token).expires_at_ms == token.expires_at_ms


@pytest.mark.django_db
def test_the_acquire_token_dies_with_the_grants_ttl_and_names_no_effect(agent):
    admit("tok-2", ttl_ms=TTL)
    a, _ = agent()
    grant = ls.lease_acquire(work_key="tok-2", executor=a)
    claims = claims_of(grant.fencing_token)
    assert claims.effect_id is None
    assert claims.expires_at_ms == grant.lease.expires_at_ms  # not the 24 h lifetime cap
    assert grant.lease.max_expires_at_ms > claims.expires_at_ms
    with pytest.raises(fencing.InvalidToken) as info:
        fencing.verify_token(
            grant.fencing_token,
            public_keys=fencing_public_keys(),
            now_ms=db_now_ms(),
            require_effect=True,
        )
    assert info.value.code == "no_effect"


# -- a recipient that never met the successor ---------------------------------------------


@pytest.mark.django_db
def test_a_paused_holders_token_is_refused_by_a_guard_that_never_saw_the_successor(
    agent, db_clock, fenced_queue
):
    admit("pause-1", queue="fenced", ttl_ms=TTL)
    paused, _ = agent("paused")
    successor, _ = agent("successor")
    lease = ls.lease_acquire(work_key="pause-1", executor=paused).lease
    effect = propose(lease, paused, "late-1")  # sent... then the process stalls
    # The recipient saw epoch 1 (its mark) and will never hear of epoch 2.
    guard, reporter = InMemoryEpochGuard(), MemoryReporter()
    recipient = TokenVerifier(
        recipient="ledger",
        public_keys=fencing_public_keys(),
        guard=guard,
        reporter=reporter,
        clock_ms=db_now_ms,  # the recipient's clock agrees with the database's
    )
    assert recipient.check(effect.fencing_token, work_key="pause-1").accepted

    # The lease runs out; its open effect fences the work item for the skew allowance.
    db_clock.advance(TTL + 1)
    with pytest.raises(LockDelay) as wait:
        ls.lease_acquire(work_key="pause-1", executor=successor)
    assert 0 < wait.value.extra["retry_after_ms"] <= skew()
    db_clock.advance(wait.value.extra["retry_after_ms"])
    assert ls.lease_acquire(work_key="pause-1", executor=successor).lease.epoch == 2

    # The paused holder wakes and sends again: refused by time, not by epoch.
    late = recipient.check(effect.fencing_token, work_key="pause-1")
    assert (late.accepted, late.code) == (False, "expired")
    assert guard.high_water("pause-1") == 1
    assert [r.reason for r in reporter.refusals] == ["expired"]


# -- fenced_until on early ends -----------------------------------------------------------


@pytest.mark.django_db
def test_after_a_revoke_the_successors_grant_waits_for_fenced_until_then_succeeds(
    agent, db_clock, fenced_queue
):
    admit("rev-1", queue="fenced", ttl_ms=TTL)
    a, _ = agent()
    b, _ = agent()
    lease = ls.lease_acquire(work_key="rev-1", executor=a).lease
    effect = propose(lease, a, "open-1")  # no outcome reported
    db_clock.advance(2_000)
    revoked = revoke(lease)
    assert revoked.fenced_until_ms == effect.token_expires_at_ms + skew()

    before = db_now_ms()
    with pytest.raises(LockDelay) as wait:
        ls.lease_acquire(work_key="rev-1", executor=b)
    retry = wait.value.extra["retry_after_ms"]
    assert revoked.fenced_until_ms - db_now_ms() <= retry <= revoked.fenced_until_ms - before
    assert wait.value.extra["fenced_until_ms"] == revoked.fenced_until_ms
    assert WorkItem.objects.get(key="rev-1").epoch == 1  # a refused grant uses no epoch

    db_clock.advance(retry - 500)  # a margin for the real milliseconds the test takes
    with pytest.raises(LockDelay):
        ls.lease_acquire(work_key="rev-1", executor=b)
    db_clock.advance(500)
    assert ls.lease_acquire(work_key="rev-1", executor=b).lease.epoch == 2


@pytest.mark.django_db
@pytest.mark.parametrize("end", ["revoke", "release"])
def test_with_every_outcome_reported_the_regrant_is_immediate(agent, fenced_queue, end):
    admit(f"now-{end}", queue="fenced", ttl_ms=TTL)
    a, _ = agent()
    b, _ = agent()
    lease = ls.lease_acquire(work_key=f"now-{end}", executor=a).lease
    effect = propose(lease, a, "done-1")
    fx.effect_report_outcome(effect_id=effect.id, executor=a, outcome="applied")
    if end == "revoke":
        ended = revoke(lease)
    else:
        ended = ls.lease_release(lease_id=lease.id, executor=a, epoch=1)
    assert ended.fenced_until_ms == 0
    assert ls.lease_acquire(work_key=f"now-{end}", executor=b).lease.epoch == 2


@pytest.mark.django_db
def test_an_unknown_outcome_keeps_the_fence_a_late_request_may_still_arrive(agent, fenced_queue):
    admit("unk-1", queue="fenced", ttl_ms=TTL)
    a, _ = agent()
    lease = ls.lease_acquire(work_key="unk-1", executor=a).lease
    effect = propose(lease, a, "timeout-1")
    fx.effect_report_outcome(effect_id=effect.id, executor=a, outcome="unknown")
    released = ls.lease_release(lease_id=lease.id, executor=a, epoch=1)
    assert released.fenced_until_ms == effect.token_expires_at_ms + skew()


# -- grants made by people: standing at once, effects after the fence -----------------------


@pytest.mark.django_db
def test_a_takeover_grants_standing_at_once_and_the_fence_binds_what_follows(
    agent, db_clock, people, fenced_queue
):
    admit("tk-1", queue="fenced", ttl_ms=TTL)
    a, _ = agent("agent-a")
    b, _ = agent("agent-b")
    lease = ls.lease_acquire(work_key="tk-1", executor=a).lease
    effect = propose(lease, a, "open-tk")
    req = request_for("tk-1", people.operator)
    iv = takeovers.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    fence = effect.token_expires_at_ms + skew()
    human = iv.lease
    assert human.epoch == 2 and human.is_live  # standing now
    assert human.fenced_until_ms == fence  # ...carrying the fence

    # Assigned to an agent before the fence passed: it holds at once, but no effect yet.
    iv = takeovers.standing_assign(
        intervention_pk=iv.id,
        actor=Actor.human(people.operator),
        lease_id=human.id,
        epoch=2,
        agent_name="agent-b",
    )
    assigned = iv.successor_lease
    assert assigned.epoch == 3 and assigned.fenced_until_ms == fence
    with pytest.raises(LockDelay) as wait:
        propose(assigned, b, "too-soon")
    assert not Effect.objects.filter(idempotency_key="too-soon").exists()  # nothing recorded
    # The agent keeps renewing while it waits (its ttl may be shorter than the fence).
    db_clock.advance(wait.value.extra["retry_after_ms"] - 2_000)
    ls.lease_renew(lease_id=assigned.id, executor=b, epoch=3)
    db_clock.advance(2_000)
    assert propose(assigned, b, "too-soon").decision == "authorized"  # decided afresh


@pytest.mark.django_db
def test_a_hand_back_passes_the_inherited_fence_to_the_next_acquire(
    agent, db_clock, people, fenced_queue
):
    admit("hb-1", queue="fenced", ttl_ms=TTL)
    a, _ = agent()
    b, _ = agent()
    lease = ls.lease_acquire(work_key="hb-1", executor=a).lease
    effect = propose(lease, a, "open-hb")
    req = request_for("hb-1", people.operator)
    iv = takeovers.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    takeovers.standing_hand_back(
        intervention_pk=iv.id, actor=Actor.human(people.operator), lease_id=iv.lease.id, epoch=2
    )
    with pytest.raises(LockDelay) as wait:
        ls.lease_acquire(work_key="hb-1", executor=b)
    assert wait.value.extra["fenced_until_ms"] == effect.token_expires_at_ms + skew()
    db_clock.advance(wait.value.extra["retry_after_ms"])
    assert ls.lease_acquire(work_key="hb-1", executor=b).lease.epoch == 3


# -- one rule, two forms --------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("state", "fenced_until", "lock_delay", "open_effect"),
    [
        ("expired", 0, 0, False),
        ("expired", 0, 0, True),
        ("expired", 0, 5_000, True),
        ("expired", 10**13, 0, False),
        ("revoked", 0, 0, True),
        ("revoked", 10**13, 0, False),
        ("released", 0, 5_000, False),
        ("active", 10**13, 0, False),
    ],
)
def test_the_fence_in_sql_and_in_python_agree(agent, state, fenced_until, lock_delay, open_effect):
    admit("rule-1", ttl_ms=TTL, lock_delay_ms=lock_delay)
    a, _ = agent()
    lease = ls.lease_acquire(work_key="rule-1", executor=a).lease
    if open_effect:
        propose(lease, a, "open-rule")
    Lease.objects.filter(id=lease.id).update(
        state=state,
        fenced_until_ms=fenced_until,
        ended_at_ms=None if state == "active" else db_now_ms(),
    )
    lease.refresh_from_db()
    with transaction.atomic():
        in_sql = (
            Lease.objects.filter(id=lease.id)
            .annotate(until=ls.base.next_grant_at_sql())
            .values_list("until", flat=True)
            .get()
        )
    assert in_sql == ls.next_grant_at(lease)
    expected = fenced_until
    if state == "expired":
        expected = max(expected, lease.expires_at_ms + max(lock_delay, skew() * open_effect))
    assert in_sql == expected
