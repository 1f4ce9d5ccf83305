"""Keyset paging of the live page (leaseboard/dashboard/selectors/live_paging.py): a cursor
says the last row's sort values back, one that does not parse is None, and "after the
cursor" selects exactly the rows after it in the sort's order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from leaseboard.core.models import Lease
from leaseboard.dashboard.selectors.live_paging import (
    decode_cursor,
    encode_cursor,
    keyset_after,
    sort_values,
)
from tests.builders import leased_item


def test_a_cursor_round_trips():
    values = ["refund-7", 3, -12]
    assert decode_cursor(encode_cursor(values), 3) == values


@pytest.mark.parametrize(
    "raw",
    [
        "not base64 at all!",
        encode_cursor(["a", 1]),  # the wrong width for a three-field sort
        encode_cursor([True, 1, 2]),  # a bool is no sort value
        encode_cursor([1.5, 1, 2]),
        encode_cursor(["a\x00b", 1, 2]),  # a NUL names no stored key
    ],
)
def test_a_cursor_that_does_not_parse_is_none(raw):
    assert decode_cursor(raw, 3) is None


def test_no_cursor_is_the_first_page():
    assert decode_cursor("", 2) is None


def test_sort_values_follow_the_fields_through_relations():
    lease = SimpleNamespace(epoch=4, work_item=SimpleNamespace(key="k-1"))
    assert sort_values(lease, ("work_item__key", "epoch")) == ["k-1", 4]  # type: ignore[arg-type]


@pytest.mark.django_db
def test_after_selects_the_rows_strictly_after_the_cursor_either_way(agent):
    executor, _ = agent()
    for key in ("a-1", "b-1", "b-2", "c-1"):
        leased_item(executor, key=key)
    fields = ("work_item__key", "epoch")
    keys = Lease.objects.order_by(*fields).values_list("work_item__key", flat=True)
    assert list(keys.filter(keyset_after(fields, ["b-1", 1], False))) == ["b-2", "c-1"]
    down = keys.order_by("-work_item__key", "-epoch")
    assert list(down.filter(keyset_after(fields, ["b-1", 1], True))) == ["a-1"]
