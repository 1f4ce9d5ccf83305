"""The product's 404 with DEBUG on, as `dev.py demo` runs (DEBUG defaults to true there):
a path nothing serves, or a view's Http404, answers as it does with DEBUG off — the site's
404 page, or the API lane's problem — never Django's technical page listing every URL."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

TECHNICAL = ("Using the URLconf", "DEBUG = True", "Django tried these URL patterns")


def answer(debug: bool, settings: Any, user: Any, path: str, **extra: str) -> tuple[int, str, str]:
    settings.DEBUG = debug
    browser = Client()  # a new handler: its middleware is loaded under this DEBUG
    if user is not None:
        browser.force_login(user)
    response = browser.get(path, **extra)
    return response.status_code, response["Content-Type"], response.content.decode()


@pytest.mark.parametrize("path", ["/no-such-page/", "/executors/999999999", "/work/x/y/z"])
@pytest.mark.parametrize("signed_in", [True, False])
def test_with_debug_on_an_unknown_page_is_the_products_404_as_with_debug_off(
    settings: Any, operator: Any, path: str, signed_in: bool
) -> None:
    user = operator if signed_in else None
    off = answer(False, settings, user, path)
    on = answer(True, settings, user, path)
    if not signed_in and off[0] == 302:  # a page behind sign-in: the redirect, both ways
        assert on[:2] == off[:2]
        return
    assert on[0] == off[0] == 404
    assert on[1] == off[1] and on[1].startswith("text/html")
    assert "There is nothing at" in on[2] and f"<code>{path}</code>" in on[2], on[2][:400]
    assert not any(mark in on[2] for mark in TECHNICAL)


def test_with_debug_on_an_unknown_api_path_on_the_agents_lane_is_still_a_problem(
    settings: Any, agent: Any
) -> None:
    _, token = agent()
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    off = answer(False, settings, None, "/api/v1/no-such-thing", **bearer)
    on = answer(True, settings, None, "/api/v1/no-such-thing", **bearer)
    assert on[0] == off[0] == 404
    assert on[1] == off[1] == "application/problem+json"
    assert '"code": "not_found"' in on[2] or '"code":"not_found"' in on[2], on[2]


def test_with_debug_on_a_views_deliberate_404_and_the_slash_redirect_are_kept(
    settings: Any, operator: Any, agent: Any
) -> None:
    settings.DEBUG = True
    browser = Client()
    browser.force_login(operator)
    # CommonMiddleware still redirects a path that exists with a trailing slash.
    redirect = browser.get("/blocked")
    assert redirect.status_code == 301 and redirect["Location"] == "/blocked/"
    # An API answer of 404 on a path that exists is the API's own problem, left as it is.
    _, token = agent()
    lost = browser.get("/api/v1/work-items/never-admitted", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert lost.status_code == 404 and lost["Content-Type"] == "application/problem+json"
    assert not any(mark in lost.content.decode() for mark in TECHNICAL)
