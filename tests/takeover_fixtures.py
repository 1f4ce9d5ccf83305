"""Fixtures for the takeover tests: people in roles, an agent holding a leased work item,
and short-hands for the takeover services."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pytest

from tests.dashboard_fixtures import PASSWORD, leased_item, make_user, make_user_in

__all__ = [
    "PASSWORD",
    "Scene",
    "_fast_passwords",
    "grant_break_glass",
    "make_user",
    "people",
    "request_for",
    "scene",
]

_seq = itertools.count(1)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):  # type: ignore[no-untyped-def]
    # PBKDF2 at full strength costs ~0.3 s per user; the tests make several per test.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class People:
    operator: Any
    approver: Any
    manager: Any


@pytest.fixture
def people(db) -> People:  # type: ignore[no-untyped-def]
    n = next(_seq)
    return People(
        operator=make_user_in(f"olga{n}", "operator"),
        approver=make_user_in(f"abe{n}", "approver"),
        manager=make_user_in(f"mia{n}", "manager"),
    )


@dataclass
class Scene:
    agent: Any
    token: str
    lease: Any
    key: str


@pytest.fixture
def scene(agent) -> Scene:  # type: ignore[no-untyped-def]
    """An agent holding a fresh lease on a new work item."""
    executor, token = agent()
    key = f"to-{next(_seq)}"
    lease = leased_item(executor, key=key)
    return Scene(agent=executor, token=token, lease=lease, key=key)


def grant_break_glass(user: Any) -> None:
    from django.contrib.auth.models import Permission

    user.user_permissions.add(
        Permission.objects.get(codename="break_glass", content_type__app_label="takeovers")
    )


def request_for(key: str, user: Any, **kw: Any):  # type: ignore[no-untyped-def]
    from leaseboard.takeovers.services import takeover_request

    args = {
        "work_key": key,
        "user": user,
        "role": "operator",
        "reason_category": "stuck",
        "reason_text": "agent loops on the refund step",
        "request_id": "req-t",
    }
    args.update(kw)
    return takeover_request(**args)
