"""Passwords nobody is shown (leaseboard/policy/services/people/passwords.py): a reset
makes the old one unusable at once and hands over a one-time link; under four-eyes it is
a proposal a second admin applies."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.domain.errors import Forbidden
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services.people.passwords import (
    password_problems,
    password_reset_apply_locked,
    person_password_reset,
    set_password_link,
)
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_a_weak_password_gets_the_validators_messages():
    assert password_problems("pam", username="pam")
    assert password_problems("a long passphrase of many words", username="pam") == []


def test_the_link_is_one_time_and_public(settings):
    settings.LEASEBOARD_PUBLIC_URL = "https://board.example.com"
    link = set_password_link(make_user("pam"))
    assert link.startswith("https://board.example.com/account/set-password/")


def test_a_reset_makes_the_old_password_unusable_and_is_audited():
    ada, pam = make_user("ada", "admin"), make_user("pam", "operator")
    reset = person_password_reset(username="pam", actor=Actor.human(ada), request_id="r-9")
    pam.refresh_from_db()
    assert not pam.has_usable_password() and "/account/set-password/" in reset.link
    entry = AuditEntry.objects.get(action="user.password_reset")
    assert entry.object_id == str(pam.pk) and "password" not in (entry.before or {})
    with pytest.raises(Forbidden):
        person_password_reset(username="ada", actor=Actor.human(ada))


def test_under_four_eyes_a_reset_waits_for_a_second_admin(settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    ada, bea = make_user("ada", "admin"), make_user("bea", "admin")
    pam = make_user("pam", "operator")
    proposed = person_password_reset(username="pam", actor=Actor.human(ada))
    assert proposed.link == "" and proposed.proposal is not None
    pam.refresh_from_db()
    assert pam.has_usable_password()  # until a second admin applies it
    change = PolicyChange.objects.get(pk=proposed.proposal.pk)
    applied = password_reset_apply_locked(change, Actor.human(bea))
    pam.refresh_from_db()
    assert not pam.has_usable_password() and applied.link
    entry = AuditEntry.objects.get(action="user.password_reset")
    assert entry.reason == f"change {change.pk} by {ada.username}"
