"""Sign-in throttling (django-axes) through the real login view: per account and per
address, after a configurable number of failures, with a page that says what happened."""

from __future__ import annotations

import pytest

from tests.builders import PASSWORD, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_strikes(settings, fast_passwords):  # type: ignore[no-untyped-def]
    settings.AXES_FAILURE_LIMIT = 3


def sign_in(client, username: str, password: str, address: str = "127.0.0.1"):  # type: ignore[no-untyped-def]
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_nth_failure_locks_the_account_with_a_clear_page(client, three_strikes):
    make_user("olga", "operator")
    assert [sign_in(client, "olga", "nope").status_code for _ in range(2)] == [200, 200]
    locked = sign_in(client, "olga", "nope")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed sign-ins" in page
    assert "After 3 failed attempts" in page and "15 minutes" in page
    assert int(locked["Retry-After"]) == 15 * 60
    assert "Content-Security-Policy" in locked  # a full page of the site, styled like it
    assert 'href="/static/leaseboard' in page


def test_under_the_limit_the_right_password_still_signs_in(client, three_strikes):
    make_user("abe", "approver")
    assert [sign_in(client, "abe", "nope").status_code for _ in range(2)] == [200, 200]
    r = sign_in(client, "abe", PASSWORD)
    assert r.status_code == 302 and "_auth_user_id" in client.session


def test_an_account_is_locked_whichever_addresses_the_guesses_come_from(client, three_strikes):
    make_user("mia", "manager")
    statuses = [sign_in(client, "mia", "nope", f"198.51.100.{i}").status_code for i in range(3)]
    assert statuses == [200, 200, 429]
    assert sign_in(client, "mia", PASSWORD, "203.0.113.50").status_code == 429


def test_an_address_is_locked_whichever_accounts_it_guesses(client, three_strikes):
    for name in ("u1", "u2", "u3", "u4"):
        make_user(name, "operator")
    statuses = [
        sign_in(client, name, "nope", "192.0.2.66").status_code for name in ("u1", "u2", "u3")
    ]
    assert statuses == [200, 200, 429]
    assert sign_in(client, "u4", PASSWORD, "192.0.2.66").status_code == 429
    # The same account from another address is fine: it had no failures of its own.
    assert sign_in(client, "u4", PASSWORD, "192.0.2.67").status_code == 302


def test_the_shell_and_commands_authenticate_without_a_request(db):
    from django.contrib.auth import authenticate

    make_user("carol")
    assert authenticate(username="carol", password=PASSWORD) is not None
    assert authenticate(username="carol", password="nope") is None


def test_failures_and_the_lock_out_are_audited_and_a_locked_flood_adds_nothing(
    client, three_strikes
):
    from leaseboard.core.models import AuditEntry

    make_user("ivy", "operator")
    for _ in range(3):
        sign_in(client, "ivy", "nope", "192.0.2.10")
    actions = list(
        AuditEntry.objects.filter(object_id="ivy").order_by("seq").values_list("action", flat=True)
    )
    assert actions.count("auth.sign_in_failed") == 3
    assert actions.count("auth.locked_out") == 1
    before = AuditEntry.objects.count()
    assert [sign_in(client, "ivy", "nope", "192.0.2.10").status_code for _ in range(20)] == [
        429
    ] * 20
    assert AuditEntry.objects.count() == before  # a locked-out flood cannot grow the log
