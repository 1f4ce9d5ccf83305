"""Checkpoints under human standing (issue 28, point 9): the person holding standing after a
takeover writes one, fenced by the standing's epoch, on the intervention's timeline and
audited; the next agent to acquire the work reads it; nobody else writes one, and none is
written once the standing has ended."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Checkpoint
from leaseboard.core.services.leases import lease_acquire
from leaseboard.domain.errors import LeaseboardError, NotFound, ValidationFailed
from leaseboard.takeovers import services
from leaseboard.takeovers.models import InterventionEvent
from leaseboard.takeovers.services.standing import checkpoint_document, standing_checkpoint
from tests.builders import age_fence, make_user, standing_on

pytestmark = pytest.mark.usefixtures("fast_passwords")


def test_the_person_holding_standing_writes_a_checkpoint_the_next_agent_reads(people, scene):
    iv = standing_on(scene.key, people)
    olga = Actor.human(people.operator)
    cp = standing_checkpoint(
        lease_id=iv.lease_id,
        actor=olga,
        epoch=iv.epoch,
        document='{"step": "refund-sent", "order": 7}',
        note="sent by hand, resume at the receipt",
        request_id="rq-cp",
    )
    assert (cp.epoch, cp.lease_id, cp.data) == (
        iv.epoch,
        iv.lease_id,
        {"step": "refund-sent", "order": 7},
    )
    entry = AuditEntry.objects.get(action="standing.checkpoint")
    assert (entry.actor_name, entry.request_id) == (people.operator.username, "rq-cp")
    assert entry.reason == "sent by hand, resume at the receipt"
    assert entry.after["seq"] == cp.seq and entry.after["epoch"] == iv.epoch
    step = InterventionEvent.objects.get(intervention=iv, kind="checkpointed")
    assert step.detail["seq"] == cp.seq

    services.standing_hand_back(
        intervention_pk=iv.pk, actor=olga, lease_id=iv.lease_id, epoch=iv.epoch, note="done"
    )
    age_fence(scene.key, 10 * 60_000)
    grant = lease_acquire(work_key=scene.key, executor=scene.agent)
    assert grant.checkpoint is not None and grant.checkpoint.id == cp.id
    # Fenced by the epoch: the ended standing writes no more.
    with pytest.raises(LeaseboardError) as refused:
        standing_checkpoint(lease_id=iv.lease_id, actor=olga, epoch=iv.epoch, document="{}")
    assert refused.value.code in {"lease_released", "stale_epoch", "not_holder"}
    assert Checkpoint.objects.count() == 1


def test_nobody_but_the_holder_writes_one_and_a_stale_epoch_is_refused(people, scene):
    iv = standing_on(scene.key, people)
    other = Actor.human(make_user("sam", "operator"))
    with pytest.raises(LeaseboardError) as refused:
        standing_checkpoint(lease_id=iv.lease_id, actor=other, epoch=iv.epoch, document="{}")
    assert refused.value.code in {"not_holder", "forbidden"}
    with pytest.raises(LeaseboardError) as stale:
        standing_checkpoint(
            lease_id=iv.lease_id,
            actor=Actor.human(people.operator),
            epoch=iv.epoch - 1,
            document="{}",
        )
    assert stale.value.code == "stale_epoch"
    with pytest.raises(NotFound):
        standing_checkpoint(
            lease_id=scene.lease.id, actor=Actor.human(people.operator), epoch=1, document="{}"
        )
    assert not Checkpoint.objects.exists()
    assert not AuditEntry.objects.filter(action="standing.checkpoint").exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "the checkpoint is not JSON: Expecting value at line 1, column 1"),
        ('{"a": 1', "the checkpoint is not JSON: Expecting ',' delimiter at line 1, column 8"),
        ("null", "a JSON document, not null"),
    ],
)
def test_a_checkpoint_that_is_not_a_json_document_is_refused_in_plain_words(text, said):
    with pytest.raises(ValidationFailed) as refused:
        checkpoint_document(text)
    assert said in refused.value.detail and refused.value.code == "validation_error"
