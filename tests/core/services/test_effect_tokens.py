"""leaseboard/core/services/effect_tokens.py: an effect's token names the effect, its lease
and epoch, its queue and the digest of what it asks, and dies no later than the lease."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Effect
from leaseboard.core.services.effect_tokens import effect_digest, effect_token_issue
from leaseboard.domain.fencing import content_digest, unverified_claims
from tests.builders import leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_digest_is_computed_once_from_kind_target_and_payload() -> None:
    effect = Effect(kind="mail.send", target="ada@example.com", payload={"n": 1})
    assert effect_digest(effect) == content_digest("mail.send", "ada@example.com", {"n": 1})
    effect.content_digest = "kept"  # set on the row once: never recomputed after
    assert effect_digest(effect) == "kept"


def test_the_token_names_the_effect_and_expires_with_the_lease(agent) -> None:  # type: ignore[no-untyped-def]
    executor, _ = agent("tokener")
    lease = leased_item(executor, key="tok-1")
    item = lease.work_item
    effect = Effect(
        work_item=item, lease=lease, executor=executor, epoch=lease.epoch, kind="k",
        target="t", payload={}, idempotency_key="i",
    )  # fmt: skip
    now = lease.granted_at_ms
    token = effect_token_issue(effect, lease, item, now, queue="default")
    claims = unverified_claims(token)
    assert claims is not None
    assert (claims.work_key, claims.epoch, claims.lease_id, claims.effect_id) == (
        "tok-1",
        lease.epoch,
        str(lease.id),
        str(effect.id),
    )
    assert claims.digest == content_digest("k", "t", {}) == effect.content_digest
    assert claims.queue == "default" and claims.holder == "tokener"
    assert now < effect.token_expires_at_ms <= lease.expires_at_ms
    assert claims.expires_at_ms == effect.token_expires_at_ms
