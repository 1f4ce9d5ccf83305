"""Recipient credentials on the settings credentials page, through the browser's HTTP
(Django's client, CSRF enforced): a token or webhook secret is shown once, on the answer
to the POST; a bad name or URL is said at its field and saves nothing; no one but an admin
gets in; nothing answers 500."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from leaseboard.core.models import AuditEntry, Recipient
from leaseboard.core.services.recipients import recipient_for_token
from tests.builders import make_user

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db,
    pytest.mark.usefixtures("fast_passwords"),
]

PAGE = "/settings/credentials/"


def _client(username: str, *roles: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(username, *roles))
    client.get("/login/")
    return client


@pytest.fixture
def admin_client() -> Client:
    return _client("ada", "admin")


def post(client: Client, path: str, data: dict | None = None):  # type: ignore[no-untyped-def]
    return client.post(
        path, {**(data or {}), "csrfmiddlewaretoken": client.cookies["csrftoken"].value}
    )


def shown_secret(body: str) -> str:
    found = re.search(r'id="secret-once">([^<]+)<', body)
    assert found, "no secret shown"
    return found.group(1)


def _act(name: str, action: str) -> str:
    return f"/settings/recipients/{Recipient.objects.get(name=name).pk}/{action}"


def test_a_recipient_is_created_its_token_shown_once_then_rotated_and_revoked(admin_client):
    r = post(admin_client, "/settings/recipients/new", {"recipient-name": "ledger"})
    assert r.status_code == 200 and r["Cache-Control"].startswith("no-store")
    token = shown_secret(r.content.decode())
    assert token.startswith("lbr_") and recipient_for_token(token).name == "ledger"
    page = admin_client.get(PAGE).content.decode()
    assert token not in page and "lbr_" not in page
    row = re.search(r'<tr id="recipient-\d+" data-name="ledger">.*?</tr>', page, re.S)
    assert row and ">active<" in row.group(0) and "no webhook set" in row.group(0)

    r = post(admin_client, _act("ledger", "rotate"))
    rotated = shown_secret(r.content.decode())
    assert rotated != token and recipient_for_token(token) is None
    assert rotated not in admin_client.get(PAGE).content.decode()

    r = post(admin_client, _act("ledger", "revoke"))
    assert r.status_code == 302 and r["Location"] == PAGE
    assert "ledger: token revoked." in admin_client.get(PAGE).content.decode()
    assert recipient_for_token(rotated) is None
    history = admin_client.get("/settings/history/").content.decode()
    for action in ("recipient.create", "recipient.token_rotate", "recipient.token_revoke"):
        assert action in history
    assert token not in history and rotated not in history


def test_the_webhook_is_set_its_secret_shown_once_and_cleared(admin_client, recipient):
    recipient("ledger")
    url = "https://ledger.example.com/leaseboard/epochs?tenant=acme"
    r = post(admin_client, _act("ledger", "webhook"), {"url": url})
    assert r.status_code == 200
    secret = shown_secret(r.content.decode())
    assert secret.startswith("whsec_")
    page = admin_client.get(PAGE).content.decode()
    assert (
        secret not in page
        and 'value="https://ledger.example.com/leaseboard/epochs?tenant=acme"' in page
    )
    assert Recipient.objects.get(name="ledger").webhook_url == url

    r = post(admin_client, _act("ledger", "webhook-clear"))
    assert r.status_code == 302
    assert Recipient.objects.get(name="ledger").webhook_url == ""
    entry = AuditEntry.objects.filter(action="recipient.webhook_clear").get()
    assert (entry.before["webhook_url"], entry.after["webhook_url"]) == (url, "")


@pytest.mark.parametrize(
    "url", ["", "not a url", "ftp://ledger.example.com/", "https://x/" + "a" * 600]
)
def test_a_bad_webhook_url_is_said_at_its_field_and_saves_nothing(admin_client, recipient, url):
    row, _ = recipient("ledger")
    seqs = list(AuditEntry.objects.values_list("seq", flat=True))
    r = post(admin_client, _act("ledger", "webhook"), {"url": url})
    assert r.status_code == 200
    body = r.content.decode()
    field_error = (
        f'<p class="field-error" role="alert" id="webhook-{row.pk}-error" data-field="url">'
    )
    error = re.search(re.escape(field_error) + "(.+?)</p>", body)
    assert error and error.group(1).startswith("webhook URL: ")
    assert f'aria-describedby="webhook-{row.pk}-error"' in body
    assert 'id="secret-once"' not in body
    assert Recipient.objects.get(name="ledger").webhook_url == ""
    assert list(AuditEntry.objects.values_list("seq", flat=True)) == seqs


@pytest.mark.parametrize("name", ["", "x" * 101, "ledger"])
def test_a_bad_or_taken_name_is_said_at_the_name_field(admin_client, recipient, name):
    recipient("ledger")
    r = post(admin_client, "/settings/recipients/new", {"recipient-name": name})
    assert r.status_code == 200
    errors = r.context["recipient_form"].errors
    assert list(errors) == ["name"], errors
    assert 'data-field="name"' in r.content.decode()
    assert Recipient.objects.count() == 1


def test_unknown_recipients_and_actions_are_404_and_gets_are_405(admin_client, recipient):
    row, _ = recipient("ledger")
    assert post(admin_client, "/settings/recipients/999999/rotate").status_code == 404
    assert post(admin_client, f"/settings/recipients/{row.pk}/delete").status_code == 404
    assert admin_client.get(f"/settings/recipients/{row.pk}/rotate").status_code == 405
    assert admin_client.get("/settings/recipients/new").status_code == 405


def test_without_csrf_nothing_changes(recipient):
    row, token = recipient("ledger")
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("ada", "admin"))
    assert client.post(f"/settings/recipients/{row.pk}/revoke").status_code == 403
    assert client.post("/settings/recipients/new", {"recipient-name": "x"}).status_code == 403
    assert recipient_for_token(token) is not None and Recipient.objects.count() == 1


@pytest.mark.parametrize("role", ["operator", "approver", "manager"])
def test_no_one_but_an_admin_gets_in(recipient, role):
    row, token = recipient("ledger")
    client = _client(f"not-admin-{role}", role)
    assert client.get(PAGE).status_code == 403
    for path, data in [
        ("/settings/recipients/new", {"recipient-name": "x"}),
        (f"/settings/recipients/{row.pk}/rotate", {}),
        (f"/settings/recipients/{row.pk}/revoke", {}),
        (f"/settings/recipients/{row.pk}/webhook", {"url": "https://x.example/"}),
        (f"/settings/recipients/{row.pk}/webhook-clear", {}),
    ]:
        assert post(client, path, data).status_code == 403, path
    assert recipient_for_token(token) is not None and Recipient.objects.count() == 1
    assert not AuditEntry.objects.filter(
        action__startswith="recipient.", actor_name__startswith="not-admin"
    ).exists()


def test_a_recipient_name_that_is_markup_or_has_slashes_is_shown_as_text(admin_client):
    r = post(admin_client, "/settings/recipients/new", {"recipient-name": "<b>a/b</b> ?#"})
    assert r.status_code == 200
    body = admin_client.get(PAGE).content.decode()
    assert "&lt;b&gt;a/b&lt;/b&gt; ?#" in body and "<b>a/b</b>" not in body
    r = post(admin_client, _act("<b>a/b</b> ?#", "rotate"))
    assert shown_secret(r.content.decode()).startswith("lbr_")
