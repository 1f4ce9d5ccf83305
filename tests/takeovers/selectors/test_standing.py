"""leaseboard.takeovers.selectors.standing on real PostgreSQL: a person's standing page
lists the interventions granted to them (live ones first), each with its time left, its
effects and the unreconciled ones, its latest checkpoint and a warning when less than a
fifth is left; a lapsed standing stays visible for a day; the assign form offers the
active agents most recently heard from first."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.services.leases import lease_renew
from leaseboard.takeovers import services
from leaseboard.takeovers.selectors.standing import known_agents, my_standing
from tests.builders import age_lease, leased_item, standing_on

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_nobody_elses_standing_and_no_agents_offered_without_any(people):  # type: ignore[no-untyped-def]
    page = my_standing(people.operator)
    assert page.standings == [] and page.agents == [] and page.warnings == []


def test_a_live_standing_with_its_effects_and_checkpoint(people, scene):  # type: ignore[no-untyped-def]
    iv = standing_on(scene.key, people)
    lease = iv.lease
    actor = Actor.human(people.operator)
    services.effect_record_human(
        intervention_pk=iv.id,
        actor=actor,
        lease_id=lease.id,
        epoch=lease.epoch,
        kind="payment.refund",
        target="order-7",
        outcome="applied",
    )
    cp = services.standing_checkpoint(
        lease_id=lease.id, actor=actor, epoch=lease.epoch, document='{"step": 3}'
    )
    page = my_standing(people.operator)
    [standing] = page.standings
    assert standing.intervention.id == iv.id and standing.live and not standing.lapsed
    assert 0 < standing.expires_in_ms <= standing.total_ms <= standing.max_in_ms
    assert not standing.warn and page.warnings == []
    assert [e.kind for e in standing.effects] == ["payment.refund"]
    assert standing.checkpoint is not None and standing.checkpoint.id == cp.id
    assert scene.agent.name in [a.name for a in page.agents]  # a live standing: assign offered
    assert my_standing(people.approver).standings == []  # the approver holds none


def test_a_standing_nearly_spent_warns_and_the_version_moves(people, scene):  # type: ignore[no-untyped-def]
    iv = standing_on(scene.key, people)
    before = my_standing(people.operator)
    total = before.standings[0].total_ms
    age_lease(iv.lease.id, int(total * 0.9))
    page = my_standing(people.operator)
    assert [s.intervention.id for s in page.warnings] == [iv.id]
    assert page.version != before.version


def test_a_lapsed_standing_is_listed_after_the_live_ones(people, scene, agent):  # type: ignore[no-untyped-def]
    old = standing_on(scene.key, people)
    other, _ = agent()
    newer_item = leased_item(other, key="st-2")
    age_lease(old.lease.id, old.lease.ttl_ms + 1000)
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease
    from leaseboard.core.services.leases import lease_expire_if_due_locked

    with transaction.atomic():
        assert lease_expire_if_due_locked(
            Lease.objects.select_for_update().get(id=old.lease.id), db_now_ms()
        )
    services.takeover_requests_expire_due()  # marks it lapsed
    live = standing_on(newer_item.work_item.key, people)
    page = my_standing(people.operator)
    assert [(s.intervention.id, s.live) for s in page.standings] == [
        (live.id, True),
        (old.id, False),
    ]
    assert page.standings[1].lapsed and page.standings[1].expires_in_ms == 0


def test_known_agents_most_recently_heard_from_first_and_only_active(agent, people):  # type: ignore[no-untyped-def]
    from leaseboard.core.services.supervision import agent_quarantine

    quiet, _ = agent("quiet-st")
    early, _ = agent("early-st")
    late, _ = agent("late-st")
    gone, _ = agent("gone-st")
    age_lease(leased_item(early, key="ka-1").id, 1_000)  # heard from a second earlier
    recent = leased_item(late, key="ka-2")
    lease_renew(lease_id=recent.id, executor=late, epoch=recent.epoch)
    agent_quarantine(  # deactivated: not offered
        executor_id=gone.id,
        actor=Actor.human(people.operator),
        reason_category="misbehaving",
        reason_text="loops",
    )
    names = [a.name for a in known_agents()]
    assert names.index("late-st") < names.index("early-st") < names.index("quiet-st")
    assert "gone-st" not in names
    seen = {a.name: a.last_seen_ms for a in known_agents()}
    assert seen["quiet-st"] is None and seen["late-st"] is not None
