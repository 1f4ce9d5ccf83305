"""`effect_propose` (leaseboard/core/services/effects.py) through real PostgreSQL: each of
its answers — authorized with a token, held for approval, refused — is written before it
is returned or raised, a repeated idempotency key gets the first answer and nothing new,
and bad input is refused before anything is written."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Alert, Effect
from leaseboard.core.services.effects import effect_error, effect_propose
from leaseboard.domain.errors import (
    IdempotencyConflict,
    NotFound,
    PolicyDenied,
    StaleEpoch,
    ValidationFailed,
)
from leaseboard.domain.fencing import unverified_claims
from leaseboard.domain.policy import RuleSpec
from tests.builders import effect_rules

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _propose(held, **over):  # type: ignore[no-untyped-def]
    executor, lease = held
    args = {
        "lease_id": lease.id,
        "executor": executor,
        "epoch": lease.epoch,
        "kind": "payment.refund",
        "target": "order-9",
        "idempotency_key": "refund-9",
        "payload": {"amount_cents": 500},
    }
    return effect_propose(**{**args, **over})


def test_an_allowed_effect_is_authorized_with_a_token_naming_its_lease_and_epoch(held):  # type: ignore[no-untyped-def]
    executor, lease = held
    effect = _propose(held)
    stored = Effect.objects.get(id=effect.id)
    assert (stored.decision, stored.source, stored.epoch) == ("authorized", "agent", lease.epoch)
    assert stored.fencing_token == effect.fencing_token and stored.content_digest
    claims = unverified_claims(effect.fencing_token)
    assert (claims.lease_id, claims.epoch, claims.effect_id) == (
        str(lease.id),
        lease.epoch,
        str(effect.id),
    )
    assert stored.token_expires_at_ms <= lease.expires_at_ms


def test_a_repeated_key_answers_as_the_first_time_and_writes_nothing(held):  # type: ignore[no-untyped-def]
    first = _propose(held)
    again = _propose(held, payload={"amount_cents": 500.0})  # the same number, spelt apart
    assert again.id == first.id and again.fencing_token == first.fencing_token
    with pytest.raises(IdempotencyConflict, match="different target"):
        _propose(held, target="order-10")
    assert Effect.objects.count() == 1


def test_a_stale_epoch_is_refused_recorded_and_alerted(held):  # type: ignore[no-untyped-def]
    _, lease = held
    with pytest.raises(StaleEpoch) as refused:
        _propose(held, epoch=lease.epoch - 1)
    effect = Effect.objects.get()
    assert (effect.decision, effect.refusal_code, effect.fencing_token) == (
        "refused",
        "stale_epoch",
        "",
    )
    assert refused.value.extra["effect_id"] == str(effect.id)
    assert Alert.objects.filter(kind="stale_effect", lease=lease).count() == 1
    # A retry gets the same refusal, from the row, not a new decision.
    with pytest.raises(StaleEpoch):
        _propose(held, epoch=lease.epoch - 1)
    assert Effect.objects.count() == 1
    assert type(effect_error(effect)) is StaleEpoch


def test_the_queues_rules_deny_or_hold_an_effect_for_approval(held):  # type: ignore[no-untyped-def]
    _, lease = held
    effect_rules(
        lease.work_item.queue,
        RuleSpec(name="no-chargebacks", kind="payment.chargeback", decision="deny"),
        RuleSpec(name="refunds-asked", kind="payment.*", decision="require_approval"),
    )
    with pytest.raises(PolicyDenied):
        _propose(held, kind="payment.chargeback", idempotency_key="cb-1")
    denied = Effect.objects.get(idempotency_key="cb-1")
    assert (denied.decision, denied.refusal_code, denied.rule_name) == (
        "refused",
        "policy_denied",
        "no-chargebacks",
    )
    pending = _propose(held)
    assert pending.decision == "pending_approval" and pending.fencing_token == ""
    assert pending.decide_by_ms is not None and pending.decide_by_ms > pending.proposed_at_ms


@pytest.mark.parametrize(
    ("over", "param"),
    [
        ({"kind": ""}, "kind"),
        ({"target": "t" * 501}, "target"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"payload": {"x": "\x00"}}, "payload"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(held, over, param):  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationFailed) as refused:
        _propose(held, **over)
    assert refused.value.extra == {"param": param}
    assert not Effect.objects.exists()


def test_an_unknown_lease_is_not_found(held):  # type: ignore[no-untyped-def]
    with pytest.raises(NotFound):
        _propose(held, lease_id="6f1c1d2e-0000-4000-8000-000000000000")
    assert not Effect.objects.exists()
