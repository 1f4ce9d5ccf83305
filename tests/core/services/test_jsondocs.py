"""Bounds on the JSON documents callers send (leaseboard/core/services/jsondocs.py): a
clear ValidationFailed naming the parameter for what PostgreSQL's jsonb would refuse or
what is too big, and one comparison of two documents by value, as jsonb keeps numbers."""

from __future__ import annotations

import math

import pytest

from leaseboard.core.services.jsondocs import json_canonical, json_size_checked
from leaseboard.domain.errors import ValidationFailed


def test_the_size_is_the_compact_encodings_bytes() -> None:
    assert json_size_checked({"a": [1, 2]}, param="payload", limit=100) == len('{"a":[1,2]}')
    assert json_size_checked({"é": 1}, param="payload", limit=100) == len('{"\\u00e9":1}')


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": "x" * 20}, "is 28 bytes; the limit is 20"),
        ({"a": "nul\x00"}, "must not contain NUL characters"),
        ({"a": math.nan}, "is not a JSON document"),
        ({"a": object()}, "is not a JSON document"),
    ],
)
def test_what_jsonb_cannot_store_or_is_too_big_is_refused_naming_the_parameter(
    value: object, message: str
) -> None:
    with pytest.raises(ValidationFailed, match=message) as refused:
        json_size_checked(value, param="checkpoint", limit=20)
    assert refused.value.extra == {"param": "checkpoint"}


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ({"n": 1e16}, {"n": 10000000000000000}),  # jsonb rewrites the spelling
        ({"n": 1e-5}, {"n": 0.00001}),
        ({"n": 1.0}, {"n": 1}),
        ([1, {"a": "b"}], (1, {"a": "b"})),
    ],
)
def test_documents_equal_by_value_compare_equal(sent: object, stored: object) -> None:
    assert json_canonical(sent) == json_canonical(stored)


@pytest.mark.parametrize(
    ("left", "right"),
    [({"n": True}, {"n": 1}), ({"n": None}, {"n": 0}), ({"n": "1"}, {"n": 1}), ([1, 2], [2, 1])],
)
def test_documents_that_differ_in_json_compare_different(left: object, right: object) -> None:
    assert json_canonical(left) != json_canonical(right)
