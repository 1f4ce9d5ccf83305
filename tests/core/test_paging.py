"""Keyset pagination helpers (leaseboard/core/paging.py): a page is cut from one row more
than it shows, and cursors that do not parse are None, never an exception."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leaseboard.core.paging import cut_page, int_cursor, page_version, pair_cursor


@pytest.mark.parametrize(
    ("rows", "size", "page", "cursor"),
    [
        ([], 3, [], ""),
        ([1, 2, 3], 3, [1, 2, 3], ""),  # the extra row was not there: the last page
        ([1, 2, 3, 4], 3, [1, 2, 3], "c3"),  # it was: the next page starts after row 3
    ],
)
def test_cut_page(rows: list[int], size: int, page: list[int], cursor: str) -> None:
    assert cut_page(rows, size, lambda row: f"c{row}") == (page, cursor)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1700000000000_42", (1700000000000, 42)),
        ("5_", None),  # no tie-breaking id
        ("x_1", None),
        ("", None),
        ("12-7", None),  # the wrong separator
    ],
)
def test_pair_cursor(raw: str, expected: tuple[int, int] | None) -> None:
    assert pair_cursor(raw, int) == expected


def test_pair_cursor_takes_its_separator_and_tail_parser() -> None:
    assert pair_cursor("9:abc", str, sep=":") == (9, "abc")


@pytest.mark.parametrize(("raw", "expected"), [("", None), ("17", 17), ("-3", -3), ("1.5", None)])
def test_int_cursor(raw: str, expected: int | None) -> None:
    assert int_cursor(raw) == expected


def test_page_version_is_equal_for_equal_bodies_and_differs_otherwise() -> None:
    one = page_version({"r": [["a", 1]], "n": ""})
    assert one == page_version({"n": "", "r": [["a", 1]]})  # key order does not count
    assert len(one) == 20 and one != page_version({"r": [["a", 2]], "n": ""})
    # Values JSON has no form for are read by their str (a UUID, a datetime).
    assert page_version([datetime(2026, 1, 1, tzinfo=UTC)]) == page_version(
        ["2026-01-01 00:00:00+00:00"]
    )
