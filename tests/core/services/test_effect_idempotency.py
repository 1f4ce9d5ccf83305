"""leaseboard/core/services/effect_idempotency.py: a repeated idempotency key must name the
same effect (payload compared canonically), and the first effect under a key is found
with or without the lease the decision read."""

from __future__ import annotations

import uuid

import pytest

from leaseboard.core.models import Effect
from leaseboard.core.services.effect_idempotency import (
    effect_first_under_key,
    effect_same_request,
)
from leaseboard.core.services.effects import effect_propose
from leaseboard.domain.errors import IdempotencyConflict
from tests.builders import leased_item


def _first(lease_id: uuid.UUID) -> Effect:
    return Effect(
        lease_id=lease_id, kind="pay", target="o-1", payload={"a": 1, "b": [2, 3]},
        idempotency_key="k-1",
    )  # fmt: skip


def test_the_same_effect_again_is_no_conflict_whatever_the_payloads_key_order() -> None:
    lid = uuid.uuid4()
    effect_same_request(_first(lid), lid, "pay", "o-1", {"b": [2, 3], "a": 1})


def test_another_effect_under_the_key_is_a_conflict_naming_what_differs() -> None:
    lid = uuid.uuid4()
    with pytest.raises(IdempotencyConflict) as raised:
        effect_same_request(_first(lid), lid, "refund", "o-1", {"a": 2})
    assert "different kind, payload" in str(raised.value)
    with pytest.raises(IdempotencyConflict, match="different lease_id"):
        effect_same_request(_first(lid), uuid.uuid4(), "pay", "o-1", {"a": 1, "b": [2, 3]})


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_first_effect_under_a_key_is_found_with_or_without_its_lease(agent) -> None:  # type: ignore[no-untyped-def]
    executor, _ = agent("keyholder")
    lease = leased_item(executor, key="idem-1")
    effect = effect_propose(
        lease_id=lease.id, executor=executor, epoch=lease.epoch, kind="k", target="t",
        idempotency_key="once",
    )  # fmt: skip
    # No lease found: the key is looked up on its own (another lease's key still conflicts).
    assert effect_first_under_key(False, None, executor, "once") == effect
    assert effect_first_under_key(True, effect.id, executor, "once") == effect
    assert effect_first_under_key(True, None, executor, "once") is None  # the read said none
    assert effect_first_under_key(False, None, executor, "never") is None
