"""The last-admin guard and the one writer of what a person may do
(leaseboard/policy/services/people/guard.py): a write that would leave too few active
admins is refused and rolled back, whichever path made it."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.models import RoleScope
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.people.guard import (
    admins_needed,
    bootstrapping,
    write_person_locked,
)
from leaseboard.policy.services.people.records import person_snapshot
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _write(user, **state):  # type: ignore[no-untyped-def]
    before = person_snapshot(user)
    with transaction.atomic():
        write_person_locked(user, {**before, **state}, before=before)


def test_the_writer_sets_roles_scopes_break_glass_and_sign_in():
    pam = make_user("pam", "operator")
    _write(pam, roles=["approver"], scopes={"approver": ["refunds"]}, break_glass=True)
    snap = person_snapshot(pam)
    assert snap["roles"] == ["approver"] and snap["break_glass"] is True
    assert snap["scopes"] == {"approver": ["refunds"]}
    _write(pam, scopes={}, active=False)
    pam.refresh_from_db()
    assert not pam.is_active and not RoleScope.objects.filter(user=pam).exists()


@pytest.mark.parametrize("change", [{"roles": ["operator"]}, {"active": False}])
def test_the_last_admin_cannot_be_taken_away_and_nothing_is_written(change):
    ada = make_user("ada", "admin")
    with pytest.raises(SettingsInvalid, match="no active admin"):
        _write(ada, **change)
    ada.refresh_from_db()
    assert person_snapshot(ada)["roles"] == ["admin"] and ada.is_active


def test_under_four_eyes_two_admins_must_remain(settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    ada, bea = make_user("ada", "admin"), make_user("bea", "admin")
    assert admins_needed(True) == 2 and admins_needed(False) == 1
    with pytest.raises(SettingsInvalid, match="two active admins must remain"):
        _write(bea, roles=[])
    make_user("cy", "admin")
    _write(bea, roles=[])  # three before: two remain
    assert person_snapshot(bea)["roles"] == [] and person_snapshot(ada)["roles"] == ["admin"]


def test_only_the_shell_bootstraps_and_only_before_two_admins_exist():
    ada = make_user("ada", "admin")
    assert bootstrapping(cli_actor("cli:root")) is True
    assert bootstrapping(Actor.human(ada)) is False  # a signed-in person never does
    make_user("bea", "admin")
    assert bootstrapping(cli_actor("cli:root")) is False


def test_the_shells_user_role_command_meets_the_same_guard():
    ada = make_user("ada", "admin")
    with pytest.raises(CommandError, match="no active admin"):
        call_command("user_role", "ada", "--remove", "admin")
    assert person_snapshot(ada)["roles"] == ["admin"]
