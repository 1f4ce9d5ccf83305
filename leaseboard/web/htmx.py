"""One view serves the full page and its htmx fragment: which one was asked for, the
headers that keep caches from mixing them up, and the polled fragment that answers 304
while nothing changed."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaseboard.web.pages import no_store

VERSION_HEADER = "X-Leaseboard-Version"
SEQ_HEADER = "X-Leaseboard-Seq"


def wants_fragment(request: HttpRequest, target: str) -> bool:
    """True when htmx asks for the fragment that replaces the element `#target`."""
    return bool(request.htmx) and request.htmx.target == target  # type: ignore[attr-defined]


def page_or_fragment(response: HttpResponse) -> HttpResponse:
    """Headers for a URL that answers with a page or a fragment: never stored, and keyed
    on the htmx headers so nothing between serves one for the other."""
    response["Vary"] = "HX-Request, HX-Target"
    return no_store(response)


def polled_fragment(
    request: HttpRequest, template: str, context: dict[str, Any], *, version: str, seq: int
) -> HttpResponse:
    """A polled fragment, or 304 when the browser already shows this `version` (equal
    versions mean an identical fragment). `seq` lets the page drop out-of-order answers."""
    if request.headers.get(VERSION_HEADER) == version:
        response = HttpResponse(status=304)
    else:
        response = render(request, template, context)
    response[VERSION_HEADER] = version
    response[SEQ_HEADER] = str(seq)
    return page_or_fragment(response)
