"""Roles as a person holds them (leaseboard/policy/services/people/grants.py): the
`role` / `role:queue` / `break_glass` form read and written back, and what is refused
before anything is written."""

from __future__ import annotations

import pytest

from leaseboard.domain.authority import ROLE_NAMES, Role
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.people.grants import (
    BREAK_GLASS,
    grants_listed,
    grants_parsed,
    roles_checked,
    scopes_checked,
    widened,
)


def test_the_role_names_are_the_roles_in_their_order():
    assert ROLE_NAMES == tuple(r.value for r in Role)
    assert ROLE_NAMES == ("operator", "approver", "manager", "admin")


def test_grants_are_read_and_written_back_in_one_form():
    roles, scopes, break_glass = grants_parsed(
        ["operator:payments", " operator:refunds", "approver", BREAK_GLASS]
    )
    assert (roles, scopes, break_glass) == (
        ["approver", "operator"],
        {"operator": ["payments", "refunds"]},
        True,
    )
    snapshot = {"roles": roles, "scopes": scopes, "break_glass": break_glass}
    assert grants_listed(snapshot) == [
        "approver",
        "operator:payments",
        "operator:refunds",
        BREAK_GLASS,
    ]


def test_a_role_named_both_ways_is_held_everywhere():
    assert grants_parsed(["manager:payments", "manager"]) == (["manager"], {}, False)


@pytest.mark.parametrize("item", ["pilot", "break_glass:payments", "admins"])
def test_a_grant_that_is_no_role_is_refused_naming_the_roles(item):
    with pytest.raises(SettingsInvalid) as refused:
        grants_parsed([item])
    assert ", ".join(ROLE_NAMES) in refused.value.errors["roles"]


@pytest.mark.parametrize(
    ("roles", "scopes", "says"),
    [
        (["approver"], {"operator": ["payments"]}, "not held"),
        (["admin"], {"admin": ["payments"]}, "every queue"),
        (["operator"], {"operator": []}, "slugs"),
        (["operator"], {"operator": ["pay ments"]}, "slugs"),
    ],
)
def test_a_scope_is_refused_unless_held_scopable_and_named(roles, scopes, says):
    with pytest.raises(SettingsInvalid) as refused:
        scopes_checked(roles, scopes)
    assert says in refused.value.errors["roles"]


def test_a_scope_is_sorted_and_deduplicated():
    assert scopes_checked(["operator"], {"operator": ["b", "a", "b"]}) == {"operator": ["a", "b"]}


@pytest.mark.django_db
def test_roles_are_checked_against_their_groups():
    assert {g.name for g in roles_checked(["operator", "admin"])} == {"operator", "admin"}
    with pytest.raises(SettingsInvalid) as refused:
        roles_checked(["operator", "pilot"])
    assert "'pilot' is not a role" in refused.value.errors["roles"]


@pytest.mark.parametrize(
    ("before", "target", "wider"),
    [
        ({"roles": []}, {"roles": ["operator"]}, True),  # a role given
        ({"roles": ["operator"]}, {"roles": ["operator"]}, False),  # held everywhere, still
        ({"roles": ["operator"], "scopes": {"operator": ["a"]}}, {"roles": ["operator"]}, True),
        (
            {"roles": ["operator"], "scopes": {"operator": ["a"]}},
            {"roles": ["operator"], "scopes": {"operator": ["a", "b"]}},
            True,
        ),
        (
            {"roles": ["operator"], "scopes": {"operator": ["a", "b"]}},
            {"roles": ["operator"], "scopes": {"operator": ["a"]}},
            False,
        ),
        ({"roles": ["operator"]}, {"roles": ["operator"], "scopes": {"operator": ["a"]}}, False),
    ],
)
def test_widened_says_whether_a_role_reaches_a_queue_it_did_not(before, target, wider):
    assert widened("operator", before, target) is wider
