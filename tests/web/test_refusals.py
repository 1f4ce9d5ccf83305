"""Refusals in the browser (leaseboard/web/refusals.py): who-you-are refusals are the 403
page, every other refusal a message (or a form error) with its stable code on a details
line of its own, not in the sentence; both escaped."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.contrib.messages.storage.fallback import FallbackStorage
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import RequestFactory

from leaseboard.domain.errors import Forbidden, NotFound, NotHolder, StaleEpoch
from leaseboard.web.refusals import refusal_text, refusals_said, refuse, refused_for_form


def _request():  # type: ignore[no-untyped-def]
    request = RequestFactory().post("/")
    request.session = {}
    request._messages = FallbackStorage(request)
    return request


def test_a_refusal_reads_as_its_detail_with_its_code() -> None:
    assert refusal_text(StaleEpoch("epoch 3 is not 4"), "Not sent: ") == (
        "Not sent: epoch 3 is not 4"
        '<small class="refusal-code">code: <code>stale_epoch</code></small>'
    )


def test_the_detail_and_the_code_are_escaped() -> None:
    text = refusal_text(StaleEpoch("<b>epoch</b> & more"))
    assert "&lt;b&gt;epoch&lt;/b&gt; &amp; more" in text and "<b>" not in text


@pytest.mark.parametrize("exc", [Forbidden("no role"), NotHolder("not yours")])
def test_a_refusal_of_who_you_are_is_the_403_page(exc) -> None:  # type: ignore[no-untyped-def]
    request = _request()
    with pytest.raises(PermissionDenied, match=exc.detail):
        refuse(request, exc)
    with pytest.raises(PermissionDenied):
        refused_for_form(exc)
    assert list(get_messages(request)) == []


def test_any_other_refusal_is_a_message_on_the_page_or_the_forms_error() -> None:
    request = _request()
    refuse(request, StaleEpoch("the lease moved on"), "Revoke: ")
    code = '<small class="refusal-code">code: <code>stale_epoch</code></small>'
    assert [str(m) for m in get_messages(request)] == [f"Revoke: the lease moved on{code}"]
    assert refused_for_form(StaleEpoch("moved on")) == f"moved on{code}"


def test_around_an_act_a_refusal_is_said_and_the_rest_of_the_act_skipped() -> None:
    request, after = _request(), []

    def act() -> None:
        raise StaleEpoch("the lease moved on")

    with refusals_said(request, prefix="Change 7: ", missing="no such change"):
        act()
        after.append("reached")
    code = '<small class="refusal-code">code: <code>stale_epoch</code></small>'
    assert [str(m) for m in get_messages(request)] == [f"Change 7: the lease moved on{code}"]
    assert after == []


def test_around_an_act_an_unknown_object_is_the_404_page_and_who_you_are_the_403() -> None:
    request = _request()
    with pytest.raises(Http404, match="no such change"):
        with refusals_said(request, prefix="", missing="no such change"):
            raise NotFound("change 7")
    with pytest.raises(PermissionDenied, match="no role"):
        with refusals_said(request, prefix="", missing="no such change"):
            raise Forbidden("no role")
    assert list(get_messages(request)) == []
