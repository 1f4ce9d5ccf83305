"""The API's JSON codec (leaseboard/api/jsoncodec.py): orjson in and out, with ninja's
encoder for what orjson does not know, and every request body a JSON object."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import orjson
import pytest
from django.test import RequestFactory
from pydantic import BaseModel

from leaseboard.api.jsoncodec import OrjsonParser, OrjsonRenderer


class _Thing(BaseModel):
    name: str


def _render(data: object) -> object:
    request = RequestFactory().get("/")
    return json.loads(OrjsonRenderer().render(request, data, response_status=200))


def test_it_renders_what_orjson_knows_and_falls_back_for_the_rest() -> None:
    at = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
    assert _render({"n": 1, 2: "non-string key", "d": Decimal("1.5"), "m": _Thing(name="x")}) == {
        "n": 1,
        "2": "non-string key",
        "d": "1.5",
        "m": {"name": "x"},
    }
    # Datetimes as ninja writes them, not orjson's own spelling.
    assert _render({"at": at}) == {"at": "2026-12-01T21:00:00Z"}


def _parse(body: bytes) -> object:
    request = RequestFactory().post("/", data=body, content_type="application/json")
    return OrjsonParser().parse_body(request)


def test_it_parses_an_object() -> None:
    assert _parse(b'{"epoch": 1, "k": [true, null]}') == {"epoch": 1, "k": [True, None]}


@pytest.mark.parametrize("body", [b"[null, null]", b"3", b'"x"', b"null"])
def test_a_body_that_is_not_an_object_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError, match="a request body is a JSON object"):
        _parse(body)


def test_malformed_json_is_a_json_decode_error_as_ninja_expects() -> None:
    with pytest.raises(json.JSONDecodeError):
        _parse(b"{nope")
    assert issubclass(orjson.JSONDecodeError, json.JSONDecodeError)
