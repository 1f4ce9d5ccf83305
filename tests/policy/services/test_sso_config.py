"""Config as code's `[sso]` table (leaseboard/policy/services/sso_config.py): checked,
normalised, written with its audit entry, refused where four-eyes forbids it."""

from __future__ import annotations

import pytest
from django.db import transaction

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry
from leaseboard.domain.errors import Forbidden
from leaseboard.policy.models import SignInPolicy, SsoGroup
from leaseboard.policy.services.common import cli_actor
from leaseboard.policy.services.sso_config import sso_apply_locked, sso_planned, sso_snapshot
from tests.builders import make_user

pytestmark = pytest.mark.django_db


def test_a_table_is_normalised_with_its_defaults():
    errors: dict[str, str] = {}
    planned = sso_planned({"groups": {"sre": ["approver:deploys", "operator"]}}, errors)
    assert errors == {}
    assert planned is not None
    assert planned["groups_claim"] == "groups" and planned["local_passwords"] is True
    assert set(planned["groups"]["sre"]) == {"operator", "approver:deploys"}


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ("not a table", "sso"),
        ({"groups_claim": ""}, "sso.groups_claim"),
        ({"local_passwords": "no"}, "sso.local_passwords"),
        ({"colour": "blue"}, "sso.colour"),
        ({"groups": ["sre"]}, "sso.groups"),
        ({"groups": {"sre": "operator"}}, "sso.groups.sre"),
        ({"groups": {"sre": ["pilot"]}}, "sso.groups.sre"),
        ({"groups": {"admins": ["admin:payments"]}}, "sso.groups.admins"),
    ],
)
def test_a_bad_table_is_refused_naming_the_path(doc, path):
    errors: dict[str, str] = {}
    assert sso_planned(doc, errors) is None
    assert path in errors, errors


def test_applying_writes_the_policy_and_groups_and_audits_before_and_after():
    SsoGroup.objects.create(name="old-team", grants=["manager"])
    target = sso_planned(
        {"groups_claim": "roles", "local_passwords": False, "groups": {"sre": ["operator"]}}, {}
    )
    assert target is not None
    with transaction.atomic():
        sso_apply_locked(target, actor=cli_actor("cli:test"))
    assert sso_snapshot() == target
    assert SignInPolicy.objects.get(id=1).local_passwords is False
    assert not SsoGroup.objects.filter(name="old-team").exists()
    entry = AuditEntry.objects.filter(action="sso.update").latest("seq")
    assert entry.before["groups"] == {"old-team": ["manager"]}
    assert entry.after["groups"] == {"sre": ["operator"]}


def test_a_person_without_the_admin_role_may_not_apply_it():
    target = sso_planned({"groups": {"sre": ["operator"]}}, {})
    assert target is not None
    with pytest.raises(Forbidden), transaction.atomic():
        sso_apply_locked(target, actor=Actor.human(make_user("olga", "operator")))
    assert not SsoGroup.objects.exists()
