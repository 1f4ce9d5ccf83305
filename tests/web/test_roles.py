"""The server-side gates (leaseboard.web.roles), asked of the one authority table with real
users and their role groups on PostgreSQL: `can` answers per act (a misspelt act is an
error, not "no"), `act_required` sends the signed-out to sign in (a polled fragment by
HX-Redirect) and refuses a person whose roles never allow the act, naming the roles that
would; a caller's request id is kept only when well-formed."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from leaseboard.domain.authority import Act
from leaseboard.web.roles import (
    act_required,
    acting,
    can,
    request_id,
    roles_allowed,
    signed_in_user,
    user_roles,
)
from tests.builders import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _request(user=None, **headers: str) -> HttpRequest:  # type: ignore[no-untyped-def]
    request = RequestFactory().get("/work/x", headers=headers)
    request.user = user or AnonymousUser()
    return request


def test_can_answers_the_tables_question_per_act_once_per_request() -> None:
    request = _request(make_user("opal", "operator"))
    answers = can(request)
    assert answers is can(request)
    assert answers["revoke"] is True and answers["request_takeover"] is True
    assert answers["configure_queue"] is False  # an admin's act: the roles are kept apart
    with pytest.raises(KeyError):
        answers["revok"]
    assert user_roles(request) == frozenset({"operator"})
    assert can(_request(make_user("nobody")))["revoke"] is False


def test_the_roles_allowed_an_act_are_named_in_the_tables_order() -> None:
    assert roles_allowed(Act.REVOKE) == ["operator", "approver"]
    assert roles_allowed(Act.CONFIGURE_QUEUE) == ["admin"]
    assert roles_allowed(Act.FILE_RECIPIENT_REPORT) == ["(none)"]


def _page(request: HttpRequest) -> HttpResponse:
    return HttpResponse("the page")


def test_act_required_signs_in_refuses_or_serves() -> None:
    gated = act_required(Act.REVOKE)(_page)
    assert gated.required_acts == (Act.REVOKE,)  # type: ignore[attr-defined]
    signed_out = gated(_request())
    assert signed_out.status_code == 302 and "next=/work/x" in signed_out["Location"]
    polled = gated(_request(HX_Request="true"))
    assert polled.status_code == 401 and polled["HX-Redirect"]
    with pytest.raises(PermissionDenied, match="operator or approver"):
        gated(_request(make_user("adam", "admin")))
    assert gated(_request(make_user("otto", "operator"))).content == b"the page"
    with pytest.raises(ValueError):
        act_required("revoke")  # type: ignore[arg-type]


def test_a_request_id_is_the_callers_when_well_formed_and_kept_for_the_request() -> None:
    assert request_id(_request(X_Request_ID="rq-1.a:b")) == "rq-1.a:b"
    bad = _request(X_Request_ID="two words\r\n")
    fresh = request_id(bad)
    assert re.fullmatch(r"[0-9a-f]{32}", fresh) and request_id(bad) == fresh
    user = make_user("oona", "operator")
    said = acting(_request(user, X_Request_ID="rq-2"))
    assert said["request_id"] == "rq-2" and said["actor"].user_id == user.id
    with pytest.raises(PermissionDenied):
        signed_in_user(_request())
