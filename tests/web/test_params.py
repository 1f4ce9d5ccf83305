"""Form and query parameters (leaseboard/web/params.py): a bad number becomes a default the
service refuses, never a 500; a posted reason is passed on as the services' arguments."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from leaseboard.web.params import int_param, reason_posted


@pytest.mark.parametrize(
    ("raw", "expected"), [("7", 7), (" 8 ", 8), ("-2", -2), ("x", -1), ("", -1), (None, -1)]
)
def test_int_param(raw: object, expected: int) -> None:
    assert int_param(raw) == expected


def test_int_param_takes_its_default() -> None:
    assert int_param("nope", default=0) == 0


def test_reason_posted_passes_both_fields_and_blank_for_missing_ones() -> None:
    request = RequestFactory().post("/x", {"reason_category": "incident", "other": "y"})
    assert reason_posted(request) == {"reason_category": "incident", "reason_text": ""}
