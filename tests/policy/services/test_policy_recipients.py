"""Recipient credentials and their epoch-notice webhook through the settings services, on
real PostgreSQL: only an admin acts, each change is audited before -> after in its own
transaction, a token or signing secret is returned once and never stored or audited, and
bad input is refused by field with nothing written."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Recipient
from leaseboard.core.models.executors import hash_token
from leaseboard.core.services.recipients import recipient_for_token
from leaseboard.domain.errors import Forbidden, NotFound, ValidationFailed
from leaseboard.policy.services import credentials
from tests.builders import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def admin():
    return Actor.human(make_user("ada", "admin"))


def _entries() -> list[tuple[str, str, dict | None, dict | None]]:
    return list(
        AuditEntry.objects.filter(object_type="recipient")
        .order_by("seq")
        .values_list("action", "actor_name", "before", "after")
    )


def test_an_admin_creates_rotates_and_revokes_and_each_is_audited_before_and_after(admin):
    recipient, token = credentials.recipient_credential_create(name="ledger", actor=admin)
    assert token.startswith("lbr_") and recipient.token_hash == hash_token(token)
    assert recipient_for_token(token) == recipient

    _, rotated = credentials.recipient_credential_rotate(name="ledger", actor=admin)
    assert recipient_for_token(token) is None  # refused from the commit on
    assert recipient_for_token(rotated) == recipient

    assert credentials.recipient_credential_revoke(name="ledger", actor=admin) is True
    assert recipient_for_token(rotated) is None
    # Revoking what is already revoked changes nothing and records nothing.
    assert credentials.recipient_credential_revoke(name="ledger", actor=admin) is False
    # A rotation gives a revoked recipient a working token again.
    _, again = credentials.recipient_credential_rotate(name="ledger", actor=admin)
    assert recipient_for_token(again) == recipient

    assert _entries() == [
        ("recipient.create", "ada", {}, {"name": "ledger", "has_token": True}),
        (
            "recipient.token_rotate",
            "ada",
            {"name": "ledger", "has_token": True},
            {"name": "ledger", "has_token": True},
        ),
        (
            "recipient.token_revoke",
            "ada",
            {"name": "ledger", "has_token": True},
            {"name": "ledger", "has_token": False},
        ),
        (
            "recipient.token_rotate",
            "ada",
            {"name": "ledger", "has_token": False},
            {"name": "ledger", "has_token": True},
        ),
    ]
    secrets = (token, rotated, again)
    assert not any(s in str(_entries()) for s in secrets)
    assert not any(s in str(Recipient.objects.values().get()) for s in secrets)


def test_the_webhook_is_set_with_a_secret_shown_once_moved_and_cleared(admin):
    credentials.recipient_credential_create(name="ledger", actor=admin)
    secret = credentials.recipient_webhook_set(
        name="ledger", url=" https://ledger.example.com/epochs ", actor=admin
    )
    assert secret.startswith("whsec_")
    row = Recipient.objects.get(name="ledger")
    assert row.webhook_url == "https://ledger.example.com/epochs"
    moved = credentials.recipient_webhook_set(
        name="ledger", url="https://ledger.example.com/v2", actor=admin
    )
    assert moved != secret
    assert credentials.recipient_webhook_clear(name="ledger", actor=admin) is True
    assert credentials.recipient_webhook_clear(name="ledger", actor=admin) is False
    row.refresh_from_db()
    assert (row.webhook_url, row.webhook_secret) == ("", "")

    hooks = [e for e in _entries() if e[0].startswith("recipient.webhook")]
    assert [(a, (b or {}).get("webhook_url"), c["webhook_url"]) for a, _, b, c in hooks] == [
        ("recipient.webhook_set", "", "https://ledger.example.com/epochs"),
        (
            "recipient.webhook_set",
            "https://ledger.example.com/epochs",
            "https://ledger.example.com/v2",
        ),
        ("recipient.webhook_clear", "https://ledger.example.com/v2", ""),
    ]
    assert secret not in str(_entries()) and moved not in str(_entries())


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ledger.example.com/epochs",
        "ftp://ledger.example.com/x",
        "https://",
        "https://x/" + "a" * 500,
    ],
)
def test_a_bad_webhook_url_is_refused_at_its_field_and_nothing_changes(admin, url):
    credentials.recipient_credential_create(name="ledger", actor=admin)
    before = list(AuditEntry.objects.values_list("seq", flat=True))
    with pytest.raises(ValidationFailed) as caught:
        credentials.recipient_webhook_set(name="ledger", url=url, actor=admin)
    assert caught.value.extra["param"] == "url"
    row = Recipient.objects.get(name="ledger")
    assert (row.webhook_url, row.webhook_secret) == ("", "")
    assert list(AuditEntry.objects.values_list("seq", flat=True)) == before


def test_a_bad_or_taken_name_is_refused_at_the_name_field(admin):
    credentials.recipient_credential_create(name="ledger", actor=admin)
    for name in ("", "   ", "x" * 101, "ledger"):
        with pytest.raises(ValidationFailed) as caught:
            credentials.recipient_credential_create(name=name, actor=admin)
        assert caught.value.extra["param"] == "name"
    assert Recipient.objects.count() == 1
    with pytest.raises(NotFound):
        credentials.recipient_credential_rotate(name="nobody", actor=admin)


@pytest.mark.parametrize("role", ["operator", "approver", "manager"])
def test_only_an_admin_manages_recipients(admin, role):
    credentials.recipient_credential_create(name="ledger", actor=admin)
    _, token = credentials.recipient_credential_rotate(name="ledger", actor=admin)
    someone = Actor.human(make_user(f"not-admin-{role}", role))
    before = (_entries(), list(Recipient.objects.values()))
    acts = [
        lambda: credentials.recipient_credential_create(name="other", actor=someone),
        lambda: credentials.recipient_credential_rotate(name="ledger", actor=someone),
        lambda: credentials.recipient_credential_revoke(name="ledger", actor=someone),
        lambda: credentials.recipient_webhook_set(
            name="ledger", url="https://x.example/", actor=someone
        ),
        lambda: credentials.recipient_webhook_clear(name="ledger", actor=someone),
    ]
    for act in acts:
        with pytest.raises(Forbidden):
            act()
    assert (_entries(), list(Recipient.objects.values())) == before
    assert recipient_for_token(token) is not None
