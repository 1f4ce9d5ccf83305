"""The fencing order (generation, epoch) on the recipient side (docs/design.md §5): tokens
carry the generation, old tokens without it verify as generation 0, and every guard (in
memory, PostgreSQL, Redis) compares the pair lexicographically, keeping the marks written
before generations existed working as generation 0.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from leaseboard_recipient import InMemoryEpochGuard, PostgresEpochGuard, TokenVerifier
from leaseboard_recipient.tokens import (
    FencingClaims,
    InvalidToken,
    sign_token,
    unverified_claims,
    verify_token,
)
from tests.recipient.keys import KEY, KID, PUBLIC
from tests.recipient.test_epoch_guards import PG_URL, pg_guard, pg_schema, redis_guard  # noqa: F401


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def token(work_key: str, epoch: int, *, generation: int = 0, effect: bool = True) -> str:
    t = now_ms()
    return sign_token(
        FencingClaims(
            work_key=work_key,
            epoch=epoch,
            generation=generation,
            lease_id=f"lease-{generation}-{epoch}",
            holder="agent",
            issued_at_ms=t,
            expires_at_ms=t + 60_000,
            kid=KID,
            effect_id=f"fx-{generation}-{epoch}" if effect else None,
        ),
        private_key_raw=KEY,
    )


def old_format_token(work_key: str, epoch: int) -> str:
    """A token exactly as servers signed them before the generation claim existed: the
    claims below, sorted, compact, signed with Ed25519 directly (not through sign_token)."""
    t = now_ms()
    body = {
        "v": 1,
        "work_key": work_key,
        "epoch": epoch,
        "lease_id": "old-lease",
        "holder": "agent",
        "issued_at_ms": t,
        "expires_at_ms": t + 60_000,
        "kid": KID,
        "effect_id": "old-effect",
        "queue": "default",
    }
    segment = (
        base64.urlsafe_b64encode(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
        .rstrip(b"=")
        .decode()
    )
    signature = Ed25519PrivateKey.from_private_bytes(KEY).sign(segment.encode())
    return f"{segment}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def claims_json(tok: str) -> dict[str, Any]:
    segment = tok.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


# -- tokens ------------------------------------------------------------------------------


def test_an_old_token_without_a_generation_verifies_as_generation_0() -> None:
    claims = verify_token(old_format_token("pay-1", 7), public_keys=PUBLIC, now_ms=now_ms())
    assert (claims.generation, claims.epoch, claims.order) == (0, 7, (0, 7))


def test_a_generation_0_token_is_spelled_as_before_and_a_higher_one_carries_the_claim() -> None:
    assert "generation" not in claims_json(token("pay-1", 3))
    high = token("pay-1", 3, generation=2)
    assert claims_json(high)["generation"] == 2
    claims = verify_token(high, public_keys=PUBLIC, now_ms=now_ms())
    assert claims.order == (2, 3)
    assert unverified_claims(high).generation == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [-1, True, "2", 2.0, 2**63])
def test_a_generation_that_is_not_a_non_negative_bigint_is_malformed(bad: object) -> None:
    good = token("pay-1", 3, generation=1)
    body = claims_json(good)
    body["generation"] = bad
    raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    segment = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    signature = Ed25519PrivateKey.from_private_bytes(KEY).sign(segment.encode())
    forged = f"{segment}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"
    with pytest.raises(InvalidToken) as refused:
        verify_token(forged, public_keys=PUBLIC, now_ms=now_ms())
    assert refused.value.code == "malformed"


@pytest.mark.parametrize(
    ("generation", "epoch", "floor", "accepted"),
    [
        (0, 5, (0, 5), True),
        (0, 4, (0, 5), False),
        (1, 1, (0, 5), True),  # a newer generation outranks any older epoch
        (1, 9, (2, 1), False),  # an older generation loses to any newer epoch
        (2, 1, (2, 1), True),
    ],
)
def test_the_epoch_floor_compares_the_whole_order(
    generation: int, epoch: int, floor: tuple[int, int], accepted: bool
) -> None:
    tok = token("pay-1", epoch, generation=generation)
    check = {"public_keys": PUBLIC, "now_ms": now_ms(), "min_generation": floor[0]}
    if accepted:
        assert verify_token(tok, min_epoch=floor[1], **check).order == (generation, epoch)  # type: ignore[arg-type]
    else:
        with pytest.raises(InvalidToken) as refused:
            verify_token(tok, min_epoch=floor[1], **check)  # type: ignore[arg-type]
        assert refused.value.code == "stale_epoch"


# -- guards ------------------------------------------------------------------------------

# (generation, epoch, accepted) in order, against one work item's mark.
SEQUENCE = [
    (0, 5, True),
    (0, 4, False),
    (1, 5, True),  # the same epoch, granted after a promotion: outranks
    (0, 5, False),  # the old primary's grant at that epoch: refused
    (0, 9, False),  # any epoch of the old generation: refused
    (1, 5, True),  # the same holder again
    (2, 1, True),
    (1, 6, False),
]


def run_sequence(guard: Any, work_key: str) -> list[tuple[bool, tuple[int, int]]]:
    out = []
    for generation, epoch, _ in SEQUENCE:
        result = guard.check_and_advance(work_key, epoch, generation=generation)
        out.append((result.accepted, result.order))
    return out


def expected_sequence() -> list[tuple[bool, tuple[int, int]]]:
    mark = (-1, -1)
    out = []
    for generation, epoch, accepted in SEQUENCE:
        if accepted:
            mark = (generation, epoch)
        out.append((accepted, mark))
    return out


def test_the_in_memory_guard_orders_generation_before_epoch() -> None:
    assert run_sequence(InMemoryEpochGuard(), "w") == expected_sequence()


def test_the_postgres_guard_orders_generation_before_epoch(pg_guard: PostgresEpochGuard) -> None:  # noqa: F811
    assert run_sequence(pg_guard, "w") == expected_sequence()
    assert pg_guard.mark("w") == (2, 1) and pg_guard.high_water("w") == 1


def test_the_redis_guard_orders_generation_before_epoch(redis_guard: Any) -> None:  # noqa: F811
    assert run_sequence(redis_guard, "w") == expected_sequence()
    assert redis_guard.client.get(redis_guard.prefix + "w") == b"2:1"
    assert redis_guard.mark("w") == (2, 1)


def test_a_postgres_mark_table_made_before_generations_keeps_its_marks(pg_schema: str) -> None:  # noqa: F811
    import psycopg

    table = f"{pg_schema}.old_guard"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        # The table as schema_sql made it before the generation column existed.
        conn.execute(
            f"CREATE TABLE {table} (work_key text PRIMARY KEY, "
            "high_water bigint NOT NULL CHECK (high_water >= 0), "
            "updated_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(f"INSERT INTO {table} (work_key, high_water) VALUES ('pay-1', 5)")
    guard = PostgresEpochGuard(PG_URL, table=table)
    try:
        guard.ensure_schema()  # adds the column, generation 0 for every existing mark
        guard.ensure_schema()  # and is idempotent
        assert guard.mark("pay-1") == (0, 5)
        assert not guard.check_and_advance("pay-1", 4).accepted
        assert guard.check_and_advance("pay-1", 5).accepted
        assert guard.check_and_advance("pay-1", 1, generation=1).accepted
        refused = guard.check_and_advance("pay-1", 9)
        assert not refused.accepted and refused.order == (1, 1)
    finally:
        guard.close()


def test_a_redis_mark_written_before_generations_reads_as_generation_0(redis_guard: Any) -> None:  # noqa: F811
    key = redis_guard.prefix + "pay-1"
    redis_guard.client.set(key, "5")  # a mark as older guards store it
    assert redis_guard.mark("pay-1") == (0, 5)
    assert not redis_guard.check_and_advance("pay-1", 4).accepted
    assert redis_guard.check_and_advance("pay-1", 6).accepted
    assert redis_guard.client.get(key) == b"6"  # generation 0 is still stored the old way
    assert redis_guard.check_and_advance("pay-1", 1, generation=3).accepted
    assert redis_guard.client.get(key) == b"3:1"
    refused = redis_guard.check_and_advance("pay-1", 99)
    assert not refused.accepted and refused.order == (3, 1)


# -- the verifier ------------------------------------------------------------------------


def test_the_verifier_refuses_the_old_primarys_token_after_the_new_primarys_same_epoch() -> None:
    verifier = TokenVerifier(recipient="payments", public_keys=PUBLIC, guard=InMemoryEpochGuard())
    lost = token("pay-1", 5, generation=1)  # granted by a primary that was then lost
    successor = token("pay-1", 5, generation=2)  # the promoted standby's grant
    assert verifier.check(old_format_token("pay-1", 4), work_key="pay-1").accepted
    assert verifier.check(successor, work_key="pay-1").accepted
    decision = verifier.check(lost, work_key="pay-1")
    assert not decision.accepted and decision.code == "stale_epoch"
    assert (decision.generation, decision.epoch) == (1, 5)
    assert (decision.high_water_generation, decision.high_water) == (2, 5)
    assert "generation 1 epoch 5" in decision.detail
