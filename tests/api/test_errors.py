"""The one place refusals become HTTP (leaseboard/api/errors.py): RFC 9457 problem details
with a stable code, its status from one table, the refusal's own fields beside the
standard members, and a request id kept only when it is a plain token."""

from __future__ import annotations

import json

import pytest
from django.test import RequestFactory

from leaseboard.api.errors import (
    DEFAULT_CONFLICT,
    PROBLEM_JSON,
    STATUS_BY_CODE,
    problem,
    problem_from_error,
    request_id,
)
from leaseboard.domain.errors import (
    LockDelay,
    NotFound,
    RateLimited,
    StaleEpoch,
    Unauthenticated,
    ValidationFailed,
    WorkNotAdmitted,
)


def _body(response) -> dict:  # type: ignore[no-untyped-def]
    assert response["Content-Type"] == PROBLEM_JSON
    return json.loads(response.content)


def test_a_problem_has_the_standard_members_and_its_extras() -> None:
    request = RequestFactory().post("/api/v1/leases/x/renew")
    r = problem(
        request, code="stale_epoch", title="Stale", detail="epoch 3", current_epoch=4, gone=None
    )
    assert r.status_code == DEFAULT_CONFLICT == 409
    assert _body(r) == {
        "type": "urn:leaseboard:problem:stale_epoch",
        "title": "Stale",
        "status": 409,
        "detail": "epoch 3",
        "code": "stale_epoch",
        "instance": "/api/v1/leases/x/renew",
        "current_epoch": 4,
    }


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (ValidationFailed("bad", param="epoch"), 400),
        (Unauthenticated(), 401),
        (NotFound("no lease"), 404),
        (StaleEpoch("old"), 409),
        (RateLimited("slow down", retry_after_ms=1), 429),
    ],
)
def test_each_refusal_has_the_status_of_its_code(exc, status: int) -> None:  # type: ignore[no-untyped-def]
    r = problem_from_error(RequestFactory().get("/api/v1/x"), exc)
    body = _body(r)
    assert r.status_code == status == body["status"]
    assert body["code"] == exc.code and body["detail"] == exc.detail
    assert STATUS_BY_CODE.get(exc.code, DEFAULT_CONFLICT) == status


def test_retry_after_is_whole_seconds_rounded_up_and_401_names_the_scheme() -> None:
    r = problem_from_error(None, LockDelay("fenced", retry_after_ms=1_200))
    assert r["Retry-After"] == "2" and _body(r)["retry_after_ms"] == 1_200
    assert "instance" not in _body(r)
    assert (
        problem_from_error(None, Unauthenticated())["WWW-Authenticate"]
        == 'Bearer realm="leaseboard"'
    )


def test_an_extra_named_like_a_standard_member_does_not_replace_it() -> None:
    r = problem_from_error(None, WorkNotAdmitted("closed", status="waiting"))
    body = _body(r)
    assert body["status"] == r.status_code == 409 and body["work_status"] == "waiting"


@pytest.mark.parametrize(
    ("given", "kept"),
    [("trace-42", True), ("a.b:c_d-1", True), ("x" * 65, False), ("has space", False), ("", False)],
)
def test_a_callers_request_id_is_kept_only_when_it_is_a_plain_token(given: str, kept: bool) -> None:
    request = RequestFactory().get("/", HTTP_X_REQUEST_ID=given)
    got = request_id(request)
    assert (got == given) is kept and got
    if not kept:
        assert len(got) == 32  # a fresh uuid4 hex
