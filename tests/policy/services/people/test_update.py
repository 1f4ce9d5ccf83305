"""Changing what a person may do (leaseboard/policy/services/people/update.py), step by
step: the target asked for, what it gives, what is taken away now while the rest waits
for a second admin, and the whole act through the last-admin guard."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.people.records import person_snapshot

# deliberate: an import list, the module marks and a table (alike in shape only).
from leaseboard.policy.services.people.update import (
    _grants,
    _taken_away,
    _target,
    _widened_roles,
    person_grants_apply_locked,
    person_update,
)
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

BEFORE = {
    "username": "pam",
    "roles": ["approver", "operator"],
    "break_glass": False,
    "active": True,
    "scopes": {"operator": ["payments"], "approver": ["refunds", "payments"]},
}


def test_the_target_keeps_the_scopes_of_the_roles_kept_unless_given():
    kept = _target(BEFORE, roles=["operator"], break_glass=False, active=True, scopes=None)
    assert kept["roles"] == ["operator"] and kept["scopes"] == {"operator": ["payments"]}
    everywhere = _target(BEFORE, roles=["operator"], break_glass=False, active=True, scopes={})
    assert "scopes" not in everywhere


def test_what_a_change_gives_and_what_it_takes_away_now():
    target = {
        **BEFORE,
        "roles": ["manager", "operator"],
        "break_glass": True,
        "scopes": {"operator": ["deploys", "payments"], "manager": ["payments"]},
    }
    wider = _widened_roles(BEFORE, target)
    assert wider == {"manager": ["payments"], "operator": ["deploys", "payments"]}
    grants = _grants(BEFORE, target, wider)
    assert grants == {
        "add_roles": ["manager"],
        "break_glass": True,
        "active": False,
        "scopes": {"manager": ["payments"], "operator": ["deploys", "payments"]},
    }
    now = _taken_away(BEFORE, target, wider)
    # The approver role goes now; operator keeps its old queue until a second admin decides.
    assert now["roles"] == ["operator"] and now["scopes"] == {"operator": ["payments"]}
    assert now["break_glass"] is False


def test_an_update_that_changes_nothing_writes_nothing():
    ada, _ = make_user("ada", "admin"), make_user("pam", "operator")
    actor = Actor.human(ada)
    same = person_update(username="pam", roles=["operator"], break_glass=False, actor=actor)
    assert same.changed is False and not AuditEntry.objects.filter(action="user.update").exists()


def test_under_four_eyes_a_role_taken_goes_now_and_a_role_given_waits(settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    ada, bea = make_user("ada", "admin"), make_user("bea", "admin")
    pam = make_user("pam", "operator")
    swapped = person_update(
        username="pam", roles=["approver"], break_glass=False, actor=Actor.human(ada), reason="rota"
    )
    assert swapped.changed and swapped.proposal is not None
    assert swapped.proposal.summary == "person pam: +approver (rota)"
    assert person_snapshot(pam)["roles"] == []  # operator taken away at once
    change = PolicyChange.objects.get(pk=swapped.proposal.pk)
    person_grants_apply_locked(change, Actor.human(bea))
    assert person_snapshot(pam)["roles"] == ["approver"]


def test_an_update_cannot_take_away_the_last_admin_even_from_the_shell():
    ada, _ = make_user("ada", "admin"), make_user("bea", "admin")
    person_update(username="bea", roles=["operator"], break_glass=False, actor=Actor.human(ada))
    with pytest.raises(SettingsInvalid, match="no active admin"):
        person_update(username="ada", roles=["manager"], break_glass=False, actor=cli_actor("c"))
    assert person_snapshot(ada)["roles"] == ["admin"]
