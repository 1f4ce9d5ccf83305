"""leaseboard.domain.diffs: history as field-by-field differences."""

from __future__ import annotations

import pytest

from leaseboard.domain.diffs import Change, FieldDiff, field_diff


def test_equal_states_have_no_difference():
    assert field_diff({"a": 1}, {"a": 1}) == []
    assert field_diff(None, None) == []


def test_it_names_each_added_removed_and_changed_field_by_its_path():
    before = {"capacity": 5, "timing": {"ttl_ms": 9000, "renew_ms": 3000}, "old": True}
    after = {"capacity": 8, "timing": {"ttl_ms": 9000, "renew_ms": 3000}, "new": "x"}
    assert field_diff(before, after) == [
        FieldDiff("capacity", Change.CHANGED, "5", "8"),
        FieldDiff("new", Change.ADDED, "", '"x"'),
        FieldDiff("old", Change.REMOVED, "true", ""),
    ]


def test_nested_fields_and_list_items_get_dotted_and_indexed_paths():
    before = {"rules": [{"name": "a", "when": "payload.amount > 1"}]}
    after = {"rules": [{"name": "a", "when": "payload.amount_cents > 1"}, {"name": "b"}]}
    assert field_diff(before, after) == [
        FieldDiff(
            "rules[0].when", Change.CHANGED, '"payload.amount > 1"', '"payload.amount_cents > 1"'
        ),
        FieldDiff("rules[1].name", Change.ADDED, "", '"b"'),
    ]


@pytest.mark.parametrize(
    ("before", "after", "change"),
    [(None, {"a": 1}, Change.ADDED), ({"a": 1}, None, Change.REMOVED)],
)
def test_a_creation_adds_and_a_deletion_removes_every_field(before, after, change):
    assert [d.change for d in field_diff(before, after)] == [change]


def test_a_scalar_state_is_one_change_of_the_whole_value():
    assert field_diff("pending", "applied") == [
        FieldDiff("", Change.CHANGED, '"pending"', '"applied"')
    ]


def test_a_value_of_another_type_is_a_change_even_when_equal_in_python():
    assert field_diff({"on": 1}, {"on": True}) == [FieldDiff("on", Change.CHANGED, "1", "true")]


def test_an_emptied_table_is_a_change_of_that_field():
    assert field_diff({"scopes": {"a": ["x"]}}, {"scopes": {}}) == [
        FieldDiff("scopes.a[0]", Change.REMOVED, '"x"', ""),
    ]
