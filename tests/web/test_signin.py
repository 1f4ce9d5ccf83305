"""leaseboard.web.signin on real PostgreSQL, its parts called directly on requests made
like the login view's: the handler counts a person's failures at one address apart from
the address's over everyone, a success forgets only that person's, the backend leaves
callers without a request (the shell, commands) to the next backend, and the lock-out
page says which limit was reached. tests/security/test_signin_throttle.py replays the
same through the login page."""

from __future__ import annotations

import pytest
from axes.handlers.proxy import AxesProxyHandler
from axes.models import AccessAttempt
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

from leaseboard.web.signin import SignInThrottleBackend, SignInThrottleHandler, locked_out
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def limits(settings):  # type: ignore[no-untyped-def]
    settings.AXES_FAILURE_LIMIT = 3
    settings.LEASEBOARD_SIGNIN_ADDRESS_FAILURE_LIMIT = 5


def login_request(username: str, address: str = "10.0.0.7"):  # type: ignore[no-untyped-def]
    request = RequestFactory().post(
        "/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR=address
    )
    request.user = AnonymousUser()
    AxesProxyHandler.update_request(request)
    return request


def fail(client, username: str, address: str = "10.0.0.7", times: int = 1) -> None:  # type: ignore[no-untyped-def]
    for _ in range(times):
        client.post("/login/", {"username": username, "password": "wrong"}, REMOTE_ADDR=address)


def failures(username: str, address: str = "10.0.0.7") -> tuple[int, bool]:
    request = login_request(username, address)
    n = SignInThrottleHandler().get_failures(request, {"username": username})
    return n, request.signin_address_locked


def test_a_persons_failures_are_theirs_at_that_address(client, limits):  # type: ignore[no-untyped-def]
    make_user("olga", "operator")
    fail(client, "olga", times=2)
    assert failures("olga") == (2, False)
    assert failures("abe") == (0, False)  # the same address, another person
    assert failures("olga", address="10.0.0.8") == (0, False)


def test_the_address_limit_over_everyone_locks_out_a_newcomer_there(client, limits):  # type: ignore[no-untyped-def]
    for name in ("u1", "u2"):
        fail(client, name, times=2)
    assert failures("newcomer") == (0, False)  # 4 failures at the address: under its 5
    fail(client, "u3")
    n, address_locked = failures("newcomer")
    assert address_locked and n >= 3  # reported as the person's limit reached
    assert failures("newcomer", address="10.0.0.8") == (0, False)


def test_a_success_forgets_only_that_persons_failures_at_that_address(client, limits):  # type: ignore[no-untyped-def]
    fail(client, "olga", times=2)
    fail(client, "abe", times=1)
    fail(client, "olga", address="10.0.0.8")
    removed = SignInThrottleHandler().reset_user_attempts(
        login_request("olga"), {"username": "olga"}
    )
    assert removed == 1
    assert failures("olga") == (0, False)
    assert failures("abe") == (1, False)
    assert failures("olga", address="10.0.0.8") == (1, False)
    assert AccessAttempt.objects.count() == 2


def test_the_backend_leaves_callers_without_a_request_to_the_next_backend(db):  # type: ignore[no-untyped-def]
    assert SignInThrottleBackend().authenticate(None, username="olga", password="x") is None


def test_the_lock_out_page_names_the_persons_limit_or_the_addresss(limits):  # type: ignore[no-untyped-def]
    request = login_request("olga")
    page = locked_out(request)
    assert page.status_code == 429 and int(page["Retry-After"]) == 15 * 60
    assert "After 3 failed attempts, sign-in for this account" in page.content.decode()
    request.signin_address_locked = True
    page = locked_out(request)
    assert page.status_code == 429
    assert "After 5 failed attempts from this address" in page.content.decode()
