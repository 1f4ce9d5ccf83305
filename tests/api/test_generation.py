"""The fencing generation through the API on PostgreSQL (docs/design.md §5): a grant reads
the primary's WAL timeline in its own statement, stores it on the lease, signs it into the
token and shows it where the epoch is shown; the online check compares the whole order
(generation, epoch), so a token of the right epoch but another generation is not current.
The failover itself is tests/ha_generation."""

from __future__ import annotations

import pytest
from django.db import connection

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Lease
from leaseboard.core.services.fencing import fencing_token_issue
from leaseboard.core.sql import GENERATION_SQL
from leaseboard.domain.fencing import unverified_claims

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def timeline() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {GENERATION_SQL}")
        return int(cursor.fetchone()[0])


def test_a_grant_carries_the_primarys_timeline_less_one_as_its_generation(api, holder):
    _, grant = holder
    generation = timeline()
    assert generation >= 0
    assert grant["generation"] == generation
    assert Lease.objects.get(id=grant["lease_id"]).generation == generation
    assert unverified_claims(grant["fencing_token"]).generation == generation  # type: ignore[union-attr]
    agent_token = holder[0]
    item = api.get("/api/v1/work-items/order-1", agent_token).json_body
    assert (item["epoch"], item["generation"]) == (1, generation)


def test_the_fencing_check_answers_the_order_and_refuses_another_generation(api, recipient, holder):
    _, credential = recipient("payments")
    _, grant = holder
    r = api.post("/api/v1/fencing/check", {"fencing_token": grant["fencing_token"]}, credential)
    body = r.json_body
    assert body["valid"] is True
    assert body["generation"] == body["current_generation"] == grant["generation"]

    # A token of this very epoch signed under another generation (as a lost primary's would
    # be, relative to its successor's): not the current order.
    lease = Lease.objects.get(id=grant["lease_id"])
    now = db_now_ms()
    lost = fencing_token_issue(
        work_key="order-1",
        epoch=lease.epoch,
        generation=lease.generation + 1,
        lease_id=str(lease.id),
        holder="someone-else",
        now_ms=now,
        expires_at_ms=now + 10_000,
    )
    r = api.post("/api/v1/fencing/check", {"fencing_token": lost}, credential)
    body = r.json_body
    assert (body["valid"], body["code"]) == (False, "stale_epoch")
    assert (body["generation"], body["epoch"]) == (lease.generation + 1, 1)
    assert (body["current_generation"], body["current_epoch"]) == (lease.generation, 1)
