"""leaseboard.policy.services.four_eyes on real PostgreSQL: turning four-eyes on takes one
admin and needs a second active admin to exist; turning it off is a proposal only another
admin applies; each change is audited; LEASEBOARD_POLICY_FOUR_EYES=true is a floor the
database cannot lower."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.domain.errors import Forbidden, ValidationFailed
from leaseboard.policy.services import changes
from leaseboard.policy.services.four_eyes import (
    active_admin_count,
    four_eyes_forced,
    four_eyes_on,
    four_eyes_set,
    four_eyes_stored,
)
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def admin() -> Actor:
    return Actor.human(make_user("ada-4e", "admin"))


def _actions() -> list[str]:
    return list(
        AuditEntry.objects.filter(action__startswith="four_eyes.")
        .order_by("seq")
        .values_list("action", flat=True)
    )


def test_off_by_default_and_one_admin_cannot_turn_it_on(admin, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_POLICY_FOUR_EYES = False
    assert not four_eyes_stored() and not four_eyes_on() and not four_eyes_forced()
    assert active_admin_count() == 1
    with pytest.raises(ValidationFailed, match="two active admins"):
        four_eyes_set(on=True, actor=admin)
    assert not four_eyes_stored() and _actions() == []


def test_on_at_once_and_off_only_by_a_second_admins_approval(admin, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_POLICY_FOUR_EYES = False
    second = Actor.human(make_user("bo-4e", "admin"))
    on = four_eyes_set(on=True, actor=admin, note="audit season")
    assert (on.changed, on.on, on.proposal) == (True, True, None)
    assert four_eyes_stored() and four_eyes_on()
    assert not four_eyes_set(on=True, actor=second).changed  # already on: nothing recorded

    off = four_eyes_set(on=False, actor=admin, note="audit done")
    assert off.changed and off.on and off.proposal is not None
    assert four_eyes_stored()  # still on until a second admin approves
    with pytest.raises(ValidationFailed, match="already waits"):
        four_eyes_set(on=False, actor=second)
    with pytest.raises(Forbidden):
        changes.change_approve(change_id=off.proposal.pk, actor=admin)  # not its proposer
    changes.change_approve(change_id=off.proposal.pk, actor=second, note="agreed")
    assert not four_eyes_stored()
    assert _actions() == ["four_eyes.on", "four_eyes.change_proposed", "four_eyes.off"]


def test_only_an_admin_changes_it(admin, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_POLICY_FOUR_EYES = False
    make_user("bo-4e2", "admin")
    with pytest.raises(Forbidden):
        four_eyes_set(on=True, actor=Actor.human(make_user("olga-4e", "operator")))
    assert not four_eyes_stored() and _actions() == []


def test_the_process_floor_keeps_it_on_whatever_the_database_says(db, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    assert four_eyes_forced() and four_eyes_on() and not four_eyes_stored()


def test_active_admins_are_counted_once_with_superusers_and_without_inactive_ones(db):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    make_user("a1-4e", "admin", "manager")
    gone = make_user("a2-4e", "admin")
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    get_user_model().objects.create_superuser("root-4e", password="x-very-long-secret-1")
    make_user("m-4e", "manager")
    assert active_admin_count() == 2
