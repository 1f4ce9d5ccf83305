"""leaseboard/core/services/effect_decisions.py, step by step on real rows: the standing
step (the authority's verdict and the fence), the policy step, and the refusal's record."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert, Effect, Lease, Queue
from leaseboard.core.services.effect_decisions import (
    Refusal,
    effect_error,
    effect_policy_step,
    effect_refusal_record,
    effect_standing_refusal,
    fence_checked,
)
from leaseboard.domain.errors import LockDelay, StaleEpoch
from tests.builders import effect_rules

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _effect(executor, lease: Lease, epoch: int) -> Effect:  # type: ignore[no-untyped-def]
    return Effect(
        work_item=lease.work_item, lease=lease, executor=executor, epoch=epoch,
        current_epoch=lease.work_item.epoch, kind="payment.refund", target="o", payload={},
        idempotency_key=f"e-{epoch}", proposed_at_ms=lease.granted_at_ms,
    )  # fmt: skip


def _version(lease: Lease) -> int:
    return Queue.objects.get(id=lease.work_item.queue_id).policy_version


def test_the_fence_holds_effects_until_it_has_passed() -> None:
    lease = Lease(fenced_until_ms=5_000)
    with pytest.raises(LockDelay) as raised:
        fence_checked(lease, 4_000)
    assert raised.value.extra["retry_after_ms"] == 1_000
    fence_checked(lease, 5_000)  # passed: no refusal


def test_the_standing_step_passes_the_holder_and_refuses_a_stale_epoch(held) -> None:  # type: ignore[no-untyped-def]
    executor, lease = held
    now = lease.granted_at_ms
    args = {"lease": lease, "item": lease.work_item, "executor": executor, "now_ms": now}
    assert effect_standing_refusal(**args, epoch=lease.epoch, queue="default") is None
    stale = effect_standing_refusal(**args, epoch=lease.epoch - 1, queue="default")
    assert stale is not None and stale.code == "stale_epoch"


def test_the_policy_step_denies_by_rule_and_allows_without_deciding(held) -> None:  # type: ignore[no-untyped-def]
    executor, lease = held
    effect_rules("default", ("payment.*", "deny"), default="allow")
    now, version = lease.granted_at_ms, _version(lease)
    denied = effect_policy_step(
        _effect(executor, lease, lease.epoch), policy_version=version, now_ms=now
    )
    assert denied is not None and denied.code == "policy_denied"
    effect_rules("default", default="allow")
    now, version = lease.granted_at_ms, _version(lease)
    allowed = _effect(executor, lease, lease.epoch)
    assert effect_policy_step(allowed, policy_version=version, now_ms=now) is None
    assert allowed.decision == "" and allowed._state.adding  # nothing written yet


def test_a_stale_refusal_is_recorded_with_the_leases_one_alert(held) -> None:  # type: ignore[no-untyped-def]
    executor, lease = held
    now = lease.granted_at_ms
    for n in (1, 2):
        effect = _effect(executor, lease, lease.epoch - 1)
        effect.idempotency_key = f"stale-{n}"
        effect_refusal_record(effect, Refusal("stale_epoch", "an older epoch"), now)
        stored = Effect.objects.get(id=effect.id)
        assert (stored.decision, stored.refusal_code) == ("refused", "stale_epoch")
        assert isinstance(effect_error(stored), StaleEpoch)
    assert Alert.objects.filter(kind=Alert.Kind.STALE_EFFECT, lease_id=lease.id).count() == 1
