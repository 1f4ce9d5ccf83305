"""A person as the people services read, audit and propose them
(leaseboard/policy/services/people/records.py): the snapshot compared before -> after,
the locked row, and a proposal that is one of its kind per person at a time."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, RoleScope
from leaseboard.domain.errors import NotFound, ValidationFailed
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.people.records import person_snapshot, propose, user_locked
from tests.builders import grant_break_glass, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_the_snapshot_names_roles_break_glass_sign_in_and_scopes_only_when_there_are_some():
    pam = make_user("pam", "operator", "approver")
    assert person_snapshot(pam) == {
        "username": "pam",
        "roles": ["approver", "operator"],
        "break_glass": False,
        "active": True,
    }
    grant_break_glass(pam)
    RoleScope.objects.create(user=pam, role="operator", queues=["refunds", "payments"])
    snap = person_snapshot(pam)
    assert snap["break_glass"] is True
    assert snap["scopes"] == {"operator": ["payments", "refunds"]}


def test_a_missing_person_is_not_found():
    with pytest.raises(NotFound, match="nobody"):
        user_locked("nobody")


def test_a_proposal_is_audited_and_a_second_of_its_kind_is_refused():
    ada, pam = make_user("ada", "admin"), make_user("pam", "operator")
    actor = Actor.human(ada)
    args = {"subject": pam, "payload": {"add_roles": ["manager"]}, "request_id": "r-1"}
    first = propose(PolicyChange.Kind.PERSON, actor, summary="person pam: +manager", **args)
    assert first.status == "pending" and first.requested_by_name == ada.username
    entry = AuditEntry.objects.get(action="user.change_proposed")
    assert entry.object_id == str(pam.pk) and entry.after["kind"] == PolicyChange.Kind.PERSON
    with pytest.raises(ValidationFailed, match="person pam already waits"):
        propose(PolicyChange.Kind.PERSON, actor, summary="person pam: +approver", **args)
    assert PolicyChange.objects.count() == 1
