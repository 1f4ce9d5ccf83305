"""The lost grant (docs/design.md §5): with synchronous replication, a grant whose wait for
the standby is cancelled is committed on the primary only, and its holder got 201 and a
token. The primary dies; the standby is promoted and grants the same work item at the
same epoch to someone else. The generation (the WAL timeline) is what tells the two
apart: the successor's fencing order is strictly higher, and both recipient guards
(PostgreSQL and Redis) and the online check refuse the lost grant's token after it.

Everything runs for real: gunicorn against a PostgreSQL 15 primary of the test's own, a
streaming standby made by pg_basebackup, `pg_cancel_backend` on the commit waiting in
SyncRep, `pg_ctl stop -m immediate` and `pg_ctl promote`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from leaseboard_recipient import TokenVerifier
from leaseboard_recipient.tokens import public_keys_from_jwks, unverified_claims
from tests.faults.stack import Stack, own_stack
from tests.ha_generation.pair import STANDBY_NAME, Primary, Standby, timeline_now
from tests.recipient.test_epoch_guards import pg_guard, pg_schema, redis_guard  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db]

MORE_PRINCIPALS = """
import json
from leaseboard.core.services.executors import agent_create
from leaseboard.core.services.recipients import recipient_create
_, agent = agent_create(name="agent-2", queues=["default"], actor_name="ha")
_, recipient = recipient_create(name="payments")
print(json.dumps({"agent": agent, "recipient": recipient}))
"""


@pytest.fixture
def pair_stack(django_db_setup, django_db_blocker) -> Iterator[tuple[Stack, dict[str, Any]]]:  # type: ignore[no-untyped-def]
    """gunicorn on a primary of the test's own; the test makes the standby (in the dict,
    so it is closed here whatever happens)."""
    holder: dict[str, Any] = {}

    def close_standby() -> None:
        standby = holder.get("standby")
        if standby is not None:
            standby.close()

    with own_stack(django_db_blocker, "lb-ha-gen-", Primary) as stack:
        stack.after_close.append(close_standby)
        yield stack, holder


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_grant_lost_in_a_failover_is_outranked_by_the_promoted_standbys_grant(
    pair_stack,  # type: ignore[no-untyped-def]
    pg_guard,  # noqa: F811
    redis_guard,  # noqa: F811
) -> None:
    stack, holder = pair_stack
    primary: Primary = stack.pg  # type: ignore[assignment]
    more = json.loads(stack.run_django(MORE_PRINCIPALS).strip().splitlines()[-1])
    api = stack.api()
    # A grant before the standby exists makes the installation's fencing key, so the
    # standby has it too (the key is a row like any other).
    assert api.post("/api/v1/work-items", json={"key": "warm-up"}).status_code == 201
    assert api.post("/api/v1/work-items/warm-up/lease", json={}).status_code == 201
    assert api.post("/api/v1/work-items", json={"key": "pay-7"}).status_code == 201
    standby = holder["standby"] = Standby(primary)
    standby.start()
    primary.require_standby(STANDBY_NAME)
    standby.replay_caught_up(primary.url("lb_faults"))
    assert timeline_now(primary.url())["wal_timeline"] == 1

    # The standby goes away; agent-1's grant waits for it, and the wait is cancelled.
    standby.stop("fast")
    cancelled: list[int] = []
    canceller = threading.Thread(
        target=lambda: cancelled.extend(primary.cancel_sync_waits(within_s=15))
    )
    canceller.start()
    lost = api.post("/api/v1/work-items/pay-7/lease", json={}, timeout=30)
    canceller.join(20)
    assert cancelled, "no commit waited for the standby"
    assert lost.status_code == 201, lost.text  # the holder was told it holds
    lost_grant = lost.json()
    assert (lost_grant["epoch"], lost_grant["generation"]) == (1, 0)
    on_primary = primary.sql(
        "SELECT l.epoch, l.generation FROM core_lease l JOIN core_workitem w "
        "ON w.id = l.work_item_id WHERE w.key = 'pay-7'",
        db="lb_faults",
    )
    assert on_primary == [(1, 0)]  # timeline 1: generation 0
    api.close()

    # The primary dies; the standby, which never received that grant, is promoted.
    stack.web.stop()  # type: ignore[union-attr]
    stack.web = None
    primary.stop("immediate")
    standby.start()
    promote_s = standby.promote()
    right_after = timeline_now(standby.url())
    assert right_after["in_recovery"] is False
    # The WAL timeline is right at once; pg_control_checkpoint() may still say 1 here.
    assert right_after["wal_timeline"] == 2, right_after
    stack.db_url = standby.url("lb_faults")
    stack.start_web()
    item = httpx.get(
        f"{stack.web.url}/api/v1/work-items/pay-7", headers=bearer(stack.token), timeout=15
    )  # type: ignore[union-attr]
    assert (item.json()["epoch"], item.json()["holder"]) == (0, None)  # the grant is lost

    # agent-2 is granted the same work item at the same epoch, by the new primary.
    with httpx.Client(base_url=stack.web.url, timeout=15) as web:  # type: ignore[union-attr]
        successor = web.post(
            "/api/v1/work-items/pay-7/lease", json={}, headers=bearer(more["agent"])
        )
        assert successor.status_code == 201, successor.text
        next_grant = successor.json()
        keys = public_keys_from_jwks(web.get("/api/v1/fencing/keys").json())
        online = web.post(
            "/api/v1/fencing/check",
            json={"fencing_token": lost_grant["fencing_token"]},
            headers=bearer(more["recipient"]),
        ).json()
        online_next = web.post(
            "/api/v1/fencing/check",
            json={"fencing_token": next_grant["fencing_token"]},
            headers=bearer(more["recipient"]),
        ).json()

    lost_claims = unverified_claims(lost_grant["fencing_token"])
    next_claims = unverified_claims(next_grant["fencing_token"])
    assert lost_claims is not None and next_claims is not None
    assert lost_claims.epoch == next_claims.epoch == 1  # the hazard: one epoch, two holders
    assert lost_claims.holder != next_claims.holder
    assert lost_claims.order == (0, 1) and next_claims.order == (1, 1)
    assert next_claims.order > lost_claims.order
    assert next_grant["generation"] == 1  # timeline 2

    # The online check on the new primary: the lost grant's token is not current.
    assert (online["valid"], online["code"]) == (False, "stale_epoch"), online
    assert (online["generation"], online["current_generation"]) == (0, 1)
    assert online_next["valid"] is True

    # Both guards, each having accepted the lost holder before it saw the successor.
    for guard in (pg_guard, redis_guard):
        verifier = TokenVerifier(
            recipient="payments", public_keys=keys, guard=guard, accept_lease_tokens=True
        )
        first = verifier.check(lost_grant["fencing_token"], work_key="pay-7")
        second = verifier.check(next_grant["fencing_token"], work_key="pay-7")
        late = verifier.check(lost_grant["fencing_token"], work_key="pay-7")
        assert first.accepted and second.accepted, (type(guard).__name__, first, second)
        assert not late.accepted and late.code == "stale_epoch", type(guard).__name__
        assert (late.high_water_generation, late.high_water) == (1, 1)
        assert guard.mark("pay-7") == (1, 1)

    print(
        f"lost grant: cancelled sync wait of backend(s) {cancelled}; promote took "
        f"{promote_s:.2f} s; right after promotion wal timeline {right_after['wal_timeline']}, "
        f"pg_control_checkpoint timeline {right_after['checkpoint_timeline']}; orders "
        f"{lost_claims.order} (lost) < {next_claims.order} (successor)"
    )
