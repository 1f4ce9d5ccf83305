"""Creating a person (leaseboard/policy/services/people/create.py): in their roles and
queues, with a one-time link instead of a password; a name taken or already proposed is
refused; under four-eyes a proposal, made when a second admin approves it."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.people.create import person_create, person_create_apply_locked
from leaseboard.policy.services.people.records import person_snapshot
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_a_new_person_holds_their_roles_and_queues_and_sets_their_own_password():
    ada = make_user("ada", "admin")
    new = person_create(
        username=" nina ",
        roles=["operator", "approver"],
        scopes={"operator": ["payments"]},
        actor=Actor.human(ada),
    )
    assert new.user is not None and new.user.username == "nina"
    assert not new.user.has_usable_password() and "/account/set-password/" in new.link
    assert person_snapshot(new.user)["scopes"] == {"operator": ["payments"]}
    assert AuditEntry.objects.get(action="user.create").after["roles"] == ["approver", "operator"]


@pytest.mark.parametrize(
    ("username", "roles", "field"),
    [("", ["operator"], "username"), ("x" * 151, ["operator"], "username"), ("ann", [], "roles")],
)
def test_a_bad_person_is_refused_and_nothing_is_made(username, roles, field):
    ada = make_user("ada", "admin")
    with pytest.raises(SettingsInvalid) as refused:
        person_create(username=username, roles=roles, actor=Actor.human(ada))
    assert field in refused.value.errors
    assert not AuditEntry.objects.filter(action="user.create").exists()


def test_a_taken_name_points_at_changing_roles_instead():
    make_user("pam", "operator")
    with pytest.raises(SettingsInvalid, match="already exists"):
        person_create(username="pam", roles=["operator"], actor=cli_actor("cli:root"))


def test_the_shell_may_give_a_password_if_the_validators_accept_it():
    with pytest.raises(SettingsInvalid, match="password refused"):
        person_create(username="ann", roles=["admin"], actor=cli_actor("c"), password="ann")
    new = person_create(
        username="ann", roles=["admin"], actor=cli_actor("c"), password="correct horse battery"
    )
    assert (
        new.link == "" and new.user is not None and new.user.check_password("correct horse battery")
    )


def test_under_four_eyes_a_new_person_is_a_proposal_made_on_approval(settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    ada, bea = make_user("ada", "admin"), make_user("bea", "admin")
    proposed = person_create(username="nina", roles=["manager"], actor=Actor.human(ada))
    assert proposed.user is None and proposed.proposal is not None
    with pytest.raises(SettingsInvalid, match="already proposed"):
        person_create(username="nina", roles=["operator"], actor=Actor.human(bea))
    change = PolicyChange.objects.get(pk=proposed.proposal.pk)
    made = person_create_apply_locked(change, Actor.human(bea))
    assert made.user is not None and person_snapshot(made.user)["roles"] == ["manager"]
    assert made.link and AuditEntry.objects.get(action="user.create").reason.startswith(
        f"change {change.pk} by"
    )
