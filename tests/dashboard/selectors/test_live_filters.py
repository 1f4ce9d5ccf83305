"""The live page's filters and sorts (leaseboard/dashboard/selectors/live_filters.py):
read from a query string, a bad value falls back to its default (never an error), and the
links the page draws say the same filters back."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from leaseboard.dashboard.selectors.live_filters import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SORT,
    PAGE_SIZES,
    SORT_CHOICES,
    SORTS,
    LiveFilters,
)


def test_the_defaults_say_nothing_in_the_query_string():
    filters = LiveFilters.from_query(QueryDict(""))
    assert filters == LiveFilters()
    assert filters.sort == DEFAULT_SORT and filters.size == DEFAULT_PAGE_SIZE
    assert filters.query() == {}


@pytest.mark.parametrize(
    ("query", "field", "value"),
    [
        ("certainty=lost", "certainty", ""),
        ("sort=colour", "sort", DEFAULT_SORT),
        ("sort=-holder", "sort", "-holder"),
        ("size=ten", "size", DEFAULT_PAGE_SIZE),
        ("size=100000", "size", max(PAGE_SIZES)),
        ("size=0", "size", 1),
        ("row=-4", "first_row", 1),
        ("q=%00refund", "q", "\ufffdrefund"),  # a NUL matches nothing, never reaches SQL
        ("queue=" + "p" * 300, "queue", "p" * 100),
    ],
)
def test_a_bad_value_falls_back_or_is_bounded(query, field, value):
    assert getattr(LiveFilters.from_query(QueryDict(query)), field) == value


def test_the_query_round_trips_and_takes_changes():
    filters = LiveFilters.from_query(QueryDict("queue=payments&sort=-due&size=25&row=26"))
    assert filters.descending and filters.sort_name == "due"
    assert filters.query() == {"queue": "payments", "sort": "-due", "size": "25", "row": "26"}
    assert LiveFilters.from_query(QueryDict("", mutable=True) | filters.query()) == filters
    assert filters.query(cursor="abc")["cursor"] == "abc"


def test_a_sort_link_flips_on_a_second_click_and_goes_back_to_the_first_page():
    by_key = LiveFilters(sort="key", cursor="c", first_row=51)
    assert by_key.sorted_by("key") == {"sort": "-key"}
    assert by_key.sorted_by("holder") == {"sort": "holder"}
    assert LiveFilters(sort="-urgency").sorted_by("urgency") == {}  # the default again
    links = by_key.sort_links
    assert set(links) == set(SORTS)
    assert links["key"]["aria"] == "ascending" and links["due"]["aria"] == "none"
    assert by_key.sort_label == "work key"
    assert ("-due", "time left (descending)") in SORT_CHOICES
