"""Fixtures for the dashboard tests: users in roles, leases made through core services,
and a way to move a lease through time by aging its stored database-clock times."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.db import connection

PASSWORD = "correct-horse-battery-staple"
_seq = itertools.count(1)


def ensure_role_groups() -> None:
    # Transactional tests truncate tables, so the migration's groups may be gone.
    from django.contrib.auth.models import Group

    from leaseboard.web.roles import ROLES

    for name in ROLES:
        Group.objects.get_or_create(name=name)


def make_user_in(username: str, *roles: str):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    ensure_role_groups()
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    if roles:
        user.groups.add(*Group.objects.filter(name__in=roles))
    return user


@pytest.fixture
def make_user(db):  # type: ignore[no-untyped-def]
    return make_user_in


@pytest.fixture
def operator(make_user):  # type: ignore[no-untyped-def]
    return make_user("olivia", "operator")


@pytest.fixture
def operator_client(client, operator):  # type: ignore[no-untyped-def]
    client.force_login(operator)
    return client


def age_lease(lease_id: Any, ms: int) -> None:
    """Move one lease `ms` into its own past: every stored time earlier by `ms`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE core_lease SET granted_at_ms = granted_at_ms - %s, "
            "renewed_at_ms = renewed_at_ms - %s, jeopardy_at_ms = jeopardy_at_ms - %s, "
            "expires_at_ms = expires_at_ms - %s, max_expires_at_ms = max_expires_at_ms - %s, "
            "due_at_ms = due_at_ms - %s WHERE id = %s",
            [ms, ms, ms, ms, ms, ms, str(lease_id)],
        )


def leased_item(executor, key: str | None = None, queue: str = "default"):  # type: ignore[no-untyped-def]
    """Admit a work item and grant `executor` a lease on it; returns the Lease."""
    from leaseboard.core.services.leases import lease_acquire
    from leaseboard.core.services.work import work_admit

    key = key or f"job-{next(_seq)}"
    work_admit(key=key, queue_name=queue)
    return lease_acquire(work_key=key, executor=executor).lease


def stale_effect_on(item_key: str, old_holder, new_holder):  # type: ignore[no-untyped-def]
    """Expire the old holder's lease by time, grant the item to `new_holder` (epoch + 1),
    then let the old holder try an effect under its old epoch: refused as stale."""
    from leaseboard.core.models import Lease
    from leaseboard.core.services.effects import effect_propose
    from leaseboard.core.services.leases import lease_acquire
    from leaseboard.domain.errors import StaleEpoch

    old = Lease.objects.get(work_item__key=item_key, state__in=["active", "jeopardy"])
    age_lease(old.id, old.ttl_ms + 1000)
    new = lease_acquire(work_key=item_key, executor=new_holder).lease
    with pytest.raises(StaleEpoch):
        effect_propose(
            lease_id=old.id,
            executor=old_holder,
            epoch=old.epoch,
            kind="payment.refund",
            target="order-42",
            idempotency_key=f"stale-{next(_seq)}",
        )
    return old, new
