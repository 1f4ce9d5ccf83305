"""Sign-in throttling (django-axes) through the real login view: per account and per
address, after a configurable number of failures, with a page that says what happened."""

from __future__ import annotations

import pytest
from django.test import Client

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


def test_one_persons_failures_never_lock_out_the_others_at_that_address(client, settings):
    """The reproduction: five wrong passwords for one person locked out everyone on that
    address for 15 minutes (behind the documented load balancer with the default
    LEASEBOARD_TRUSTED_PROXIES=0, every supervisor at once). The lock is the person's at
    that address; their further tries do not count towards the address's limit."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("olga", "operator")
    make_user("abe", "approver")
    proxy = "10.0.0.1"
    statuses = [sign_in(client, "olga", "nope", proxy).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    assert [sign_in(client, "olga", "nope", proxy).status_code for _ in range(200)] == [429] * 200
    assert sign_in(client, "olga", PASSWORD, proxy).status_code == 429  # she waits
    # Abe, behind the same proxy, signs in.
    assert sign_in(Client(), "abe", PASSWORD, proxy).status_code == 302


def test_a_person_locked_at_one_address_may_sign_in_from_another(client, three_strikes):
    make_user("mia", "manager")
    statuses = [sign_in(client, "mia", "nope", "198.51.100.7").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert sign_in(Client(), "mia", PASSWORD, "203.0.113.50").status_code == 302


def test_an_address_guessing_across_accounts_meets_its_own_higher_limit(client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AXES_FAILURE_LIMIT = 3
    settings.LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT = 6
    names = [f"u{i}" for i in range(8)]
    for name in names:
        make_user(name, "operator")
    # Two guesses per account stay under each person's limit; the address's sixth locks it.
    statuses = [
        sign_in(client, name, "nope", "192.0.2.66").status_code
        for name in names[:3]
        for _ in range(2)
    ]
    assert statuses == [200] * 5 + [429]
    locked = sign_in(Client(), "u7", PASSWORD, "192.0.2.66")
    assert locked.status_code == 429 and "from this address, over every account" in (
        locked.content.decode()
    )
    # Elsewhere the same accounts are fine: none reached its own limit.
    assert sign_in(Client(), "u7", PASSWORD, "192.0.2.67").status_code == 302


def test_one_accounts_success_does_not_wipe_what_its_address_guessed(client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AXES_FAILURE_LIMIT = 3
    settings.LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT = 4
    for name in ("a", "b", "c"):
        make_user(name, "operator")
    address = "192.0.2.90"
    sign_in(client, "a", "nope", address)
    sign_in(client, "a", "nope", address)
    sign_in(client, "b", "nope", address)
    assert sign_in(Client(), "c", PASSWORD, address).status_code == 302
    assert sign_in(client, "b", "nope", address).status_code == 429  # the address's fourth


def test_the_address_limit_must_be_above_a_persons():
    import os
    import subprocess
    import sys

    env = {"LEASEBOARD_SIGNIN_FAILURE_LIMIT": "5", "LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT": "5"}
    code = "import django; django.setup()"
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "leaseboard.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0 and "LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT" in run.stderr


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
