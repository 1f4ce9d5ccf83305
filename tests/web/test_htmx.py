"""One view, page or fragment (leaseboard/web/htmx.py): which one htmx asked for, headers
that keep caches from mixing them, and a polled fragment that answers 304 while the
browser already shows its version."""

from __future__ import annotations

from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from leaseboard.web.htmx import (
    SEQ_HEADER,
    VERSION_HEADER,
    page_or_fragment,
    polled_fragment,
    wants_fragment,
)


def _request(**headers: str):  # type: ignore[no-untyped-def]
    request = RequestFactory().get("/", **headers)
    request.htmx = HtmxDetails(request)
    return request


def test_wants_fragment_only_for_an_htmx_request_targeting_that_element() -> None:
    assert wants_fragment(_request(HTTP_HX_REQUEST="true", HTTP_HX_TARGET="rows"), "rows")
    assert not wants_fragment(_request(HTTP_HX_REQUEST="true", HTTP_HX_TARGET="other"), "rows")
    assert not wants_fragment(_request(HTTP_HX_TARGET="rows"), "rows")  # not htmx at all
    assert not wants_fragment(_request(), "rows")


def test_page_or_fragment_is_never_stored_and_varies_on_the_htmx_headers() -> None:
    from django.http import HttpResponse

    response = page_or_fragment(HttpResponse("x"))
    assert response["Vary"] == "HX-Request, HX-Target"
    assert response["Cache-Control"] == "no-store"


LOCMEM = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "OPTIONS": {
            "loaders": [("django.template.loaders.locmem.Loader", {"frag.html": "{{ n }} rows"})]
        },
    }
]


def test_a_polled_fragment_renders_a_new_version_and_answers_304_for_the_same(settings) -> None:  # type: ignore[no-untyped-def]
    settings.TEMPLATES = LOCMEM
    fresh = polled_fragment(_request(), "frag.html", {"n": 7}, version="v2", seq=3)
    assert fresh.status_code == 200 and fresh.content == b"7 rows"
    assert (fresh[VERSION_HEADER], fresh[SEQ_HEADER]) == ("v2", "3")
    shown = _request(HTTP_X_LEASEBOARD_VERSION="v2")
    same = polled_fragment(shown, "frag.html", {"n": 8}, version="v2", seq=4)
    assert same.status_code == 304 and same.content == b""
    assert (same[VERSION_HEADER], same[SEQ_HEADER]) == ("v2", "4")
    assert same["Cache-Control"] == "no-store" and same["Vary"] == "HX-Request, HX-Target"
    other = polled_fragment(
        _request(HTTP_X_LEASEBOARD_VERSION="v1"), "frag.html", {"n": 8}, version="v2", seq=5
    )
    assert other.status_code == 200 and other.content == b"8 rows"
