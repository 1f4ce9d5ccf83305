"""The people side of single sign-on (leaseboard.policy.services.sso), without a browser:
roles from the groups claim at each sign-in, the last-admin guard on this path too, a
person found by (issuer, subject) only. The browser flow against a real provider is
tests/e2e/test_browser_sso.py."""

from __future__ import annotations

import pytest

from leaseboard.core.models import AuditEntry
from leaseboard.policy.models import SignInPolicy, SsoGroup
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.sso import person_sso_sign_in
from tests.builders import ensure_role_groups

pytestmark = pytest.mark.django_db

ISSUER = "https://idp.example.com"


@pytest.fixture(autouse=True)
def _mappings(db):  # type: ignore[no-untyped-def]
    ensure_role_groups()
    SignInPolicy.objects.create(id=1, groups_claim="roles")
    SsoGroup.objects.create(name="admins", grants=["admin"])
    SsoGroup.objects.create(name="pay", grants=["operator:payments"])


def _roles(user) -> set[str]:  # type: ignore[no-untyped-def]
    return set(user.groups.values_list("name", flat=True))


def test_roles_follow_the_configured_claim_and_unmapped_groups_give_nothing():
    user = person_sso_sign_in(
        issuer=ISSUER, subject="s1", claims={"roles": ["pay", "unmapped"], "groups": ["admins"]}
    )
    assert _roles(user) == {"operator"}  # "groups" is not the configured claim
    entry = AuditEntry.objects.get(action="auth.sso_sign_in")
    assert entry.after["provider"] == ISSUER and entry.after["subject"] == "s1"


def test_the_last_admins_sign_in_is_refused_when_the_provider_drops_their_group():
    admin = person_sso_sign_in(issuer=ISSUER, subject="a1", claims={"roles": ["admins"]})
    assert _roles(admin) == {"admin"}
    with pytest.raises(SettingsInvalid, match="no active admin"):
        person_sso_sign_in(issuer=ISSUER, subject="a1", claims={"roles": []})
    assert _roles(admin) == {"admin"}  # nothing changed, the sign-in refused
    assert AuditEntry.objects.filter(action="auth.sso_sign_in").count() == 1


def test_the_same_subject_at_another_issuer_is_another_person():
    one = person_sso_sign_in(issuer=ISSUER, subject="s1", claims={"preferred_username": "kim"})
    two = person_sso_sign_in(
        issuer="https://other.example.com", subject="s1", claims={"preferred_username": "kim"}
    )
    assert one.pk != two.pk and two.username == "kim-s1"
