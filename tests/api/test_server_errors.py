"""What escapes a handler or a middleware is still an answer in the contract (docs/design.md §14):
`internal_error` problem+json with a request id, or 503 `unavailable` with Retry-After for
a database error, on the agents' lane and on the full stack; never an HTML page."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError
from django.test import Client

from tests.api.schema_check import CheckedApiClient

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def api(contract):  # type: ignore[no-untyped-def]
    # Django's test client re-raises a view's exception by default; a server does not.
    return CheckedApiClient(Client(raise_request_exception=False), contract)


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("a bug")


def _db_down(*args: object, **kwargs: object) -> None:
    raise OperationalError("connection to server at 127.0.0.1 failed: Connection refused")


def _problem(response, status: int, code: str) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json_body
    assert body["code"] == code and body["status"] == status
    return body


def test_a_bug_in_a_handler_on_the_lane_is_an_internal_error_problem_with_a_request_id(
    api, holder, monkeypatch, caplog
):  # type: ignore[no-untyped-def]
    token, grant = holder
    monkeypatch.setattr("leaseboard.api.v1.lease_services.lease_renew", _boom)
    with caplog.at_level(logging.ERROR, logger="leaseboard.api.errors"):
        r = api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": 1}, token)
    body = _problem(r, 500, "internal_error")
    assert body["request_id"] and r["X-Request-Id"] == body["request_id"]
    logged = [rec for rec in caplog.records if body["request_id"] in rec.getMessage()]
    assert logged and logged[0].exc_info and "a bug" in str(logged[0].exc_info[1])


def test_a_callers_request_id_is_kept(api, holder, monkeypatch):  # type: ignore[no-untyped-def]
    token, grant = holder
    monkeypatch.setattr("leaseboard.api.v1.lease_services.lease_renew", _boom)
    r = api.client.post(
        f"/api/v1/leases/{grant['lease_id']}/renew",
        data={"epoch": 1},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_X_REQUEST_ID="trace-42",
    )
    assert r.status_code == 500 and r.json()["request_id"] == "trace-42"


@pytest.mark.parametrize("lane", [True, False])
def test_a_bug_in_a_middleware_is_a_problem_not_html_on_either_chain(
    holder, contract, monkeypatch, settings, lane
):  # type: ignore[no-untyped-def]
    # The rate limiter runs before any view, on the lane and on the full stack; the lane's
    # old handler500 rendered the dashboard's 500 page, which cannot reverse its URLs there.
    settings.LEASEBOARD_RATE_LIMIT_ENABLED = True
    token, grant = holder
    settings.LEASEBOARD_API_LANE = lane  # read when a new client loads its middleware
    api = CheckedApiClient(Client(raise_request_exception=False), contract)
    monkeypatch.setattr("leaseboard.api.ratelimit.limiter", _boom)
    r = api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": 1}, token)
    body = _problem(r, 500, "internal_error")
    assert body["request_id"]


@pytest.mark.parametrize("where", ["handler", "middleware"])
def test_a_database_error_anywhere_on_an_api_path_is_503_unavailable_with_retry_after(
    api, holder, monkeypatch, settings, where
):  # type: ignore[no-untyped-def]
    token, grant = holder
    if where == "handler":
        monkeypatch.setattr("leaseboard.api.v1.lease_services.lease_renew", _db_down)
    else:
        settings.LEASEBOARD_RATE_LIMIT_ENABLED = True
        monkeypatch.setattr("leaseboard.api.ratelimit.limiter", _db_down)
    r = api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": 1}, token)
    body = _problem(r, 503, "unavailable")
    assert int(r["Retry-After"]) >= 1 and body["retry_after_ms"] >= 1000
    assert body["reason"] == "unreachable" and "nothing was changed" in body["detail"]


def test_the_unavailable_page_renders_without_the_database(rf, django_assert_num_queries):  # type: ignore[no-untyped-def]
    from leaseboard.web.errors import unavailable_page

    with django_assert_num_queries(0):
        response = unavailable_page(rf.post("/leases/x/hold"), "unreachable")
    html = response.content.decode()
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert "The database is unreachable, nothing was changed." in html
    assert "leaseboard.css" in html


def test_a_database_error_in_a_dashboard_view_is_the_503_page(monkeypatch):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    from tests.builders import make_user

    make_user("watcher", "operator")
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.get(username="watcher"))
    monkeypatch.setattr("leaseboard.web.pages.badge_and_sweeps", _db_down)
    r = client.get("/")
    assert r.status_code == 503 and "The database is unreachable" in r.content.decode()
