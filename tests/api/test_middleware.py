"""The API middleware (leaseboard.api.middleware), through the real stack and on its own:
a body over the limit (or with a length that is not a number) is a 413 problem before any
view runs, and a path or method no operation serves is a 404 or 405 problem with Allow,
never Django's HTML page; pages outside /api/ are left alone."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from leaseboard.api.errors import PROBLEM_JSON
from leaseboard.api.middleware import ApiBodyLimitMiddleware, unrouted

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


class View:
    def __init__(self, status: int = 200, **headers: str) -> None:
        self.calls = 0
        self.status, self.headers = status, headers

    def __call__(self, request: HttpRequest) -> HttpResponse:
        self.calls += 1
        response = HttpResponse("html", status=self.status, content_type="text/html")
        for name, value in self.headers.items():
            response[name] = value
        return response


@pytest.mark.parametrize("length", ["2049", "-1", "lots"])
def test_an_oversized_or_unreadable_length_is_refused_before_the_view(settings, length) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    view = View()
    request = RequestFactory().post("/api/v1/effects", data=b"{}", content_type="application/json")
    request.META["CONTENT_LENGTH"] = length
    response = ApiBodyLimitMiddleware(view)(request)
    assert response.status_code == 413 and view.calls == 0
    assert response["Content-Type"].startswith(PROBLEM_JSON)
    assert b"2048 bytes" in response.content


def test_a_body_within_the_limit_and_any_page_outside_the_api_reach_the_view(settings) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    view = View()
    within = RequestFactory().post("/api/v1/effects", data=b"{}", content_type="application/json")
    assert ApiBodyLimitMiddleware(view)(within).status_code == 200
    page = RequestFactory().post("/settings/", data=b"x" * 4096, content_type="text/plain")
    assert ApiBodyLimitMiddleware(view)(page).status_code == 200
    assert view.calls == 2


def test_an_unrouted_api_path_or_method_becomes_a_problem_keeping_allow() -> None:
    request = RequestFactory().delete("/api/v1/work-items")
    missing = ApiBodyLimitMiddleware(View(404))(request)
    assert missing.status_code == 404 and missing["Content-Type"].startswith(PROBLEM_JSON)
    wrong = unrouted(request, View(405, Allow="GET, POST")(request))
    assert (wrong.status_code, wrong["Allow"]) == (405, "GET, POST")
    assert b"DELETE is not allowed here" in wrong.content


def test_through_the_stack_an_oversized_body_is_413_and_a_bad_path_404(client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    big = client.post("/api/v1/work-items", data=b"x" * 2000, content_type="application/json")
    assert big.status_code == 413 and big.json()["code"] == "validation_error"
    nowhere = client.get("/api/v1/no-such-thing")
    assert nowhere.status_code == 404 and nowhere.json()["code"] == "not_found"
