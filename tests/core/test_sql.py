"""Every statement in leaseboard.core.sql and leaseboard.core.sql_batch, run on
PostgreSQL (the test database) and on a temporary SQLite database built from the same
models with Django's schema editor (the embedded default's dialect, WAL and IMMEDIATE
transactions as in settings). Rows are written through Django's insert compiler on the
connection under test, so both dialects get the same rows. A statement added to either
module without a case here fails `test_every_statement_in_the_module_runs_here`.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection as pg_connection
from django.db.models import Model
from django.db.models.sql import InsertQuery
from django.db.utils import ConnectionHandler

from leaseboard.core import sql, sql_batch
from leaseboard.core.compiled import CompiledRead, attnames, model_insert
from leaseboard.core.models import Alert, Executor, Lease, LeaseEvent, Queue, WorkItem
from leaseboard.core.models.leases import RENEWAL_SLOT
from leaseboard.core.services.leases.grants import grant_write
from leaseboard.domain import reconciliation, vocabulary
from leaseboard.domain.certainty import Certainty
from leaseboard.envconf import sqlite_database
from leaseboard.sandbox.models import EpochMark

COVERED = {
    "now_ms",
    "lease_renew",
    "epoch_mark_upsert",
    "executor_active_shared",
    "lease_grant",
}
# leaseboard.core.sql_batch: the statements over a batch of locked leases.
COVERED_BATCH = {"lease_versions_unchanged", "lease_jeopardy_mark", "lease_expire_mark"}
HELPERS = {
    "literal",
    "grant_columns",
    "rows_source",
    "rows_params",
    "prepared_cursor",
    "unsupported_vendor",
    "keyed_params",
    "lease_version",
}
# Parents first. Executor has a user link, so SQLite (foreign keys on) needs auth's tables.
TABLES = (
    ContentType, Permission, Group, User, Queue, WorkItem, Executor, Lease, LeaseEvent, Alert,
    EpochMark,
)  # fmt: skip


@pytest.mark.parametrize(("module", "covered"), [(sql, COVERED), (sql_batch, COVERED_BATCH)])
def test_every_statement_in_the_module_runs_here(module, covered):
    # Cached statements (functools.cache) count too: unwrap them.
    functions = {name: inspect.unwrap(fn) for name, fn in inspect.getmembers(module, callable)}
    public = {
        name
        for name, fn in functions.items()
        if inspect.isfunction(fn) and fn.__module__ == module.__name__ and not name.startswith("_")
    }
    assert public - HELPERS == covered


@pytest.mark.parametrize(
    "enum",
    [
        Certainty,
        vocabulary.ExecutorKind,
        vocabulary.GrantKind,
        vocabulary.Admission,
        vocabulary.WorkStatus,
        vocabulary.AlertKind,
        reconciliation.Decision,
        reconciliation.Outcome,
        reconciliation.Resolution,
        reconciliation.Source,
        reconciliation.PolicyDecision,
    ],
)
def test_every_stored_enum_value_is_a_safe_sql_literal(enum):
    for member in enum:
        assert sql.literal(member) == f"'{member.value}'"


def test_a_value_that_would_need_quoting_is_refused_as_a_literal():
    from enum import StrEnum

    class Hostile(StrEnum):
        QUOTE = "it's"

    with pytest.raises(ValueError):
        sql.literal(Hostile.QUOTE)


def test_an_unknown_vendor_gets_no_sql():
    with pytest.raises(NotImplementedError, match="oracle"):
        sql.lease_renew("oracle", 1)


# --- the two databases -------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_connection(tmp_path_factory, django_db_blocker) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("dialects") / "leaseboard.sqlite3"
    # A private handler: the temporary database never joins django.db.connections.
    conn = ConnectionHandler({"default": sqlite_database(str(path))})["default"]
    with django_db_blocker.unblock():
        with conn.schema_editor() as editor:
            for model in TABLES:
                editor.create_model(model)
    yield conn
    with django_db_blocker.unblock():
        conn.close()


@pytest.fixture(
    params=[
        # The test database; the test's transaction rolls the rows back.
        pytest.param(sql.POSTGRESQL, marks=[pytest.mark.postgres, pytest.mark.django_db]),
        sql.SQLITE,
    ],
)
def conn(request, django_db_blocker) -> Iterator[Any]:
    if request.param == sql.POSTGRESQL:
        assert pg_connection.vendor == sql.POSTGRESQL
        yield pg_connection
        return
    lite = request.getfixturevalue("sqlite_connection")
    assert lite.vendor == sql.SQLITE
    with django_db_blocker.unblock():
        yield lite
        with lite.cursor() as cursor:
            for model in reversed(TABLES):
                cursor.execute(f"DELETE FROM {model._meta.db_table}")


def insert(conn: Any, *objs: Model) -> None:
    """Insert model instances (explicit primary keys) through Django's compiler on `conn`."""
    for obj in objs:
        query = InsertQuery(type(obj))
        query.insert_values(type(obj)._meta.local_concrete_fields, [obj])
        query.get_compiler(connection=conn).execute_sql()


def fetch(conn: Any, statement: str, params: list[Any] | tuple[Any, ...] = ()) -> list[tuple]:
    with conn.cursor() as cursor:
        cursor.execute(statement, params)
        return list(cursor.fetchall()) if cursor.description else []


def db_now(conn: Any) -> int:
    return int(fetch(conn, f"SELECT {sql.now_ms(conn.vendor)}")[0][0])


def lease_id(conn: Any, value: uuid.UUID) -> Any:
    return Lease._meta.pk.get_db_prep_value(value, conn)


def lease_row(conn: Any, lid: uuid.UUID) -> dict[str, Any]:
    columns = ("state", "renewed_at_ms", "expires_at_ms", "due_at_ms", "renew_count")
    statement = (
        f"SELECT {', '.join(columns)}, recent_renewals, max_expires_at_ms "
        f"FROM {Lease._meta.db_table} WHERE id = %s"
    )
    (row,) = fetch(conn, statement, [lease_id(conn, lid)])
    return dict(zip((*columns, "recent_renewals", "max_expires_at_ms"), row, strict=True))


def scene(conn: Any, now: int) -> tuple[Executor, Executor, WorkItem]:
    """A queue, a work item and two agents, with ids far from any sequence's values."""
    queue = Queue(id=990_001, name="sql-dialects")
    item = WorkItem(id=990_001, key="sql-dialects", queue=queue,
                    admission=WorkItem.Admission.ADMITTED, created_at_ms=now, epoch=9)  # fmt: skip
    holder = Executor(id=990_001, name="sql-holder", kind=Executor.Kind.AGENT)
    other = Executor(id=990_002, name="sql-other", kind=Executor.Kind.AGENT)
    insert(conn, queue, item, holder, other)
    return holder, other, item


def work_items(conn: Any, now: int, first_id: int, name: str, n: int) -> list[WorkItem]:
    """`n` admitted work items of the scene's queue, inserted, each to hold one lease."""
    items = [
        WorkItem(id=first_id + i, key=f"sql-{name}-{i}", queue_id=990_001,
                 admission=WorkItem.Admission.ADMITTED, created_at_ms=now, epoch=1)
        for i in range(n)
    ]  # fmt: skip
    insert(conn, *items)
    return items


def lease(item: WorkItem, holder: Executor, now: int, epoch: int, **changes: Any) -> Lease:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "work_item": item,
        "holder": holder,
        "epoch": epoch,
        "state": Lease.State.ACTIVE,
        "grant_kind": Lease.GrantKind.ACQUIRE,
        "granted_at_ms": now - 1_000,
        "renewed_at_ms": now - 1_000,
        "jeopardy_at_ms": now + 9_000,
        "expires_at_ms": now + 14_000,
        "max_expires_at_ms": now + 3_600_000,
        "due_at_ms": now + 9_000,
        "ttl_ms": 15_000,
        "renew_after_ms": 5_000,
        "jeopardy_after_ms": 10_000,
    }
    values.update(changes)
    if values["state"] not in (Certainty.ACTIVE, Certainty.JEOPARDY):
        values["ended_at_ms"] = now
    return Lease(**values)


# --- one test per statement, each on both databases --------------------------------------


def test_now_ms_reads_the_database_clock_in_milliseconds_with_the_test_offset(conn, settings):
    before = int(time.time() * 1000)
    first, second = db_now(conn), db_now(conn)
    assert abs(first - before) < 60_000  # milliseconds since the Unix epoch, not seconds
    assert second >= first
    settings.LEASEBOARD_DB_CLOCK_OFFSET_MS = 3_600_000
    shifted = db_now(conn)
    assert 3_600_000 <= shifted - second < 3_660_000


def test_lease_renew_sets_an_absolute_expiry_only_for_this_holders_live_matching_leases(conn):
    now = db_now(conn)
    holder, other, item = scene(conn, now)
    # One item may hold one live lease; these rows only exercise the WHERE clause, so the
    # renewable ones sit on items of their own.
    items = work_items(conn, now, 990_100, "renew", 6)
    mine = lease(items[0], holder, now, 1)
    capped = lease(
        items[1], holder, now, 1, expires_at_ms=now + 4_000, max_expires_at_ms=now + 4_000
    )
    stale = lease(items[2], holder, now, 1)
    theirs = lease(items[3], other, now, 1)
    jeopardy = lease(items[4], holder, now, 1, state=Lease.State.JEOPARDY)
    overdue = lease(items[5], holder, now, 1, jeopardy_at_ms=now - 2, expires_at_ms=now - 1)
    released = lease(item, holder, now, 1, state=Lease.State.RELEASED)
    insert(conn, mine, capped, stale, theirs, jeopardy, overdue, released)

    pairs = [(mine, 1), (capped, 1), (stale, 2), (theirs, 1), (jeopardy, 1), (overdue, 1)]
    pairs.append((released, 1))
    versions = [[lease_id(conn, row.id), epoch] for row, epoch in pairs]
    params = [*sql.rows_params(conn.vendor, versions), holder.id]
    rows = fetch(conn, sql.lease_renew(conn.vendor, len(pairs)), params)

    renewed = {Lease._meta.pk.to_python(rid): (epoch, left) for rid, epoch, left, _hold in rows}
    assert set(renewed) == {mine.id, capped.id}
    assert renewed[mine.id] == (1, 15_000)  # expires_in is the ttl, not remaining + ttl
    after = lease_row(conn, mine.id)
    assert after["expires_at_ms"] == after["renewed_at_ms"] + 15_000
    assert after["due_at_ms"] == after["renewed_at_ms"] + 10_000
    assert after["renew_count"] == 1
    assert after["recent_renewals"] == f"{after['renewed_at_ms']:013d},"
    assert len(after["recent_renewals"]) == RENEWAL_SLOT
    capped_after = lease_row(conn, capped.id)
    assert capped_after["expires_at_ms"] == capped_after["max_expires_at_ms"]  # lifetime cap
    assert renewed[capped.id][1] == now + 4_000 - capped_after["renewed_at_ms"]
    for untouched in (stale, theirs, jeopardy, overdue, released):
        assert lease_row(conn, untouched.id)["renew_count"] == 0
    # One lease: a typed VALUES row on PostgreSQL instead of arrays, the same renewal.
    one = [*sql.rows_params(conn.vendor, versions[:1]), holder.id]
    (again,) = fetch(conn, sql.lease_renew(conn.vendor, 1), one)
    assert Lease._meta.pk.to_python(again[0]) == mine.id
    assert lease_row(conn, mine.id)["renew_count"] == 2


def many_work_items(now: int, first_id: int, prefix: str, n: int = 6_000) -> list[WorkItem]:
    """`n` admitted work items in the scene's queue, in one insert: enough rows that a
    plan test's statistics mean something."""
    return WorkItem.objects.bulk_create(
        WorkItem(id=first_id + i, key=f"{prefix}-{i}", queue_id=990_001, epoch=1,
                 admission=WorkItem.Admission.ADMITTED, created_at_ms=now)
        for i in range(n)
    )  # fmt: skip


@pytest.mark.postgres
@pytest.mark.django_db
def test_lease_renew_finds_the_rows_by_id_never_through_the_holder_index():
    """The holder is a check, not the way in. Statistics taken before a holder's grants
    estimate it at a lease or two; PostgreSQL then drove a 500-row renew from
    lease_holder_state_idx and matched the id list once per lease the holder had
    (bench/storm.py: 500 of a holder's 12,500 leases in 1.1-1.5 s, instead of ~15 ms)."""
    now = db_now(pg_connection)
    holder, other, _ = scene(pg_connection, now)
    items = many_work_items(now, 991_000, "sql-plan")
    Lease.objects.bulk_create(lease(item, other, now, 1) for item in items[:5_000])
    with pg_connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Lease._meta.db_table}")  # before `holder` held anything
    mine = Lease.objects.bulk_create(lease(item, holder, now, 1) for item in items[5_000:])
    pairs = [[lease_id(pg_connection, row.id), 1] for row in mine[:500]]
    params = [*sql.rows_params(sql.POSTGRESQL, pairs), holder.id]
    with pg_connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql.lease_renew(sql.POSTGRESQL, len(pairs)), params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # By the primary key or a hash of the id list (this small table's choice), never a
    # loop over the holder's leases.
    assert "lease_holder_state_idx" not in plan, plan
    assert len(fetch(pg_connection, sql.lease_renew(sql.POSTGRESQL, len(pairs)), params)) == 500


def test_lease_versions_unchanged_returns_only_leases_still_as_read(conn):
    now = db_now(conn)
    holder, _, item = scene(conn, now)
    items = work_items(conn, now, 990_200, "version", 3)
    same, renewed, swept = (lease(items[n], holder, now, 1) for n in range(3))
    insert(conn, same, renewed, swept)
    as_read = {
        same.id: (same.state, same.epoch, same.renewed_at_ms, same.expires_at_ms, same.due_at_ms),
        # What a sweep read before a renewal and a state change landed:
        renewed.id: (
            renewed.state,
            1,
            renewed.renewed_at_ms - 1,
            renewed.expires_at_ms,
            renewed.due_at_ms,
        ),  # fmt: skip
        swept.id: (
            Lease.State.JEOPARDY,
            1,
            swept.renewed_at_ms,
            swept.expires_at_ms,
            swept.due_at_ms,
        ),  # fmt: skip
    }
    items_of = {same.id: same.work_item_id, renewed.id: renewed.work_item_id,
                swept.id: swept.work_item_id}  # fmt: skip
    versions = [[lease_id(conn, lid), items_of[lid], *v] for lid, v in as_read.items()]
    params = sql_batch.keyed_params(conn.vendor, versions, list(items_of.values()))
    statement = sql_batch.lease_versions_unchanged(conn.vendor, len(as_read))
    rows = fetch(conn, statement, params)
    assert {Lease._meta.pk.to_python(row[0]) for row in rows} == {same.id}
    # Read under another work item, the same lease is not as read (its shard's key).
    versions[0][1] = renewed.work_item_id
    params = sql_batch.keyed_params(conn.vendor, versions, list(items_of.values()))
    assert fetch(conn, statement, params) == []


def test_lease_jeopardy_mark_moves_only_unchanged_leases_and_opens_each_alert_once(conn):
    now = db_now(conn)
    holder, _, _ = scene(conn, now)
    items = work_items(conn, now, 990_300, "jeopardy", 3)
    due = {"jeopardy_at_ms": now - 500, "due_at_ms": now - 500, "expires_at_ms": now + 4_500}
    fresh, alerted, renewed = (lease(items[n], holder, now, 1, **due) for n in range(3))
    insert(conn, fresh, alerted, renewed)
    key = f"jeopardy:{alerted.id}:1"  # a jeopardy alert this lease already has
    insert(conn, Alert(id=990_001, kind="jeopardy", dedupe_key=key, message="earlier",
                       detail={}, opened_at_ms=now - 100, lease_id=alerted.id,
                       work_item_id=alerted.work_item_id, epoch=1))  # fmt: skip

    def row(claimed: Lease, renewed_at_ms: int) -> list[Any]:
        return [
            lease_id(conn, claimed.id), claimed.state, claimed.epoch, renewed_at_ms,
            claimed.expires_at_ms, claimed.due_at_ms, f"jeopardy:{claimed.id}:1",
            f"message {claimed.work_item_id}", holder.name, holder.kind, now, None,
        ]  # fmt: skip

    # The claim read `renewed` before its renewal landed: its version no longer matches.
    rows = [row(fresh, fresh.renewed_at_ms), row(alerted, alerted.renewed_at_ms)]
    rows.append(row(renewed, renewed.renewed_at_ms - 1))
    params = sql.rows_params(conn.vendor, rows)
    answers = []
    for statement in sql_batch.lease_jeopardy_mark(conn.vendor, len(rows)):
        answers += fetch(conn, statement, params)
    assert sorted(what for what, _, _, _ in answers) == ["alert", "lease", "lease"]
    ((_, alert_id, alert_due, burst),) = [a for a in answers if a[0] == "alert"]
    assert burst is None  # no burst named: opened unresolved, folded after the write
    assert alert_due == fresh.jeopardy_at_ms

    for marked in (fresh, alerted):
        after = lease_row(conn, marked.id)
        assert (after["state"], after["due_at_ms"]) == ("jeopardy", marked.expires_at_ms)
    assert lease_row(conn, renewed.id)["state"] == "active"
    events = fetch(
        conn,
        f"SELECT lease_id, kind, at_ms, detail FROM {LeaseEvent._meta.db_table} ORDER BY at_ms",
    )
    assert {Lease._meta.pk.to_python(e[0]) for e in events} == {fresh.id, alerted.id}
    for _, kind, at_ms, detail in events:
        assert (kind, at_ms) == ("jeopardy", now - 500)  # dated when jeopardy began
        detail = json.loads(detail) if isinstance(detail, str) else detail
        assert detail == {"materialized_at_ms": now, "expires_at_ms": now + 4_500}
    alerts = fetch(
        conn,
        f"SELECT id, dedupe_key, message, detail, opened_at_ms FROM {Alert._meta.db_table} "
        "ORDER BY opened_at_ms",
    )
    assert [a[1] for a in alerts] == [key, f"jeopardy:{fresh.id}:1"]
    opened = alerts[1]
    assert (opened[0], opened[2], opened[4]) == (alert_id, "message 990300", now)
    detail = json.loads(opened[3]) if isinstance(opened[3], str) else opened[3]
    assert detail == {"holder": "sql-holder", "holder_kind": "agent", "expires_at_ms": now + 4_500}


def test_a_row_naming_a_burst_opens_its_alert_as_the_burst_s_resolved_member(conn):
    """`burst` set: the alert is born folded into that incident and resolved when swept
    (both statements, both dialects); the answer names the incident."""
    now = db_now(conn)
    holder, _, _ = scene(conn, now)
    items = work_items(conn, now, 990_500, "born", 2)
    insert(conn, Alert(id=990_201, kind="jeopardy", dedupe_key="burst:jeopardy:1:1",
                       message="burst", detail={}, opened_at_ms=now - 100),
           Alert(id=990_202, kind="expired", dedupe_key="burst:expired:1:1",
                 message="burst", detail={}, opened_at_ms=now - 100))  # fmt: skip
    marked = lease(items[0], holder, now, 1, jeopardy_at_ms=now - 500, due_at_ms=now - 500,
                   expires_at_ms=now + 4_500)  # fmt: skip
    ending = lease(items[1], holder, now, 1, state=Lease.State.JEOPARDY, jeopardy_at_ms=now - 4_500,
                   expires_at_ms=now - 500, due_at_ms=now - 500)  # fmt: skip
    insert(conn, marked, ending)
    jeopardy_row = [
        lease_id(conn, marked.id), marked.state, marked.epoch, marked.renewed_at_ms,
        marked.expires_at_ms, marked.due_at_ms, f"jeopardy:{marked.id}:1", "m",
        holder.name, holder.kind, now, 990_201,
    ]  # fmt: skip
    answers = []
    for statement in sql_batch.lease_jeopardy_mark(conn.vendor, 1):
        answers += fetch(conn, statement, sql.rows_params(conn.vendor, [jeopardy_row]))
    assert [a[3] for a in answers if a[0] == "alert"] == [990_201]
    expire_row = [
        lease_id(conn, ending.id), ending.work_item_id, ending.state, ending.epoch,
        ending.renewed_at_ms, ending.expires_at_ms, ending.due_at_ms, "expired",
        f"expired:{ending.id}:1", f"jeopardy:{ending.id}:1", "m", json.dumps({}), now, 990_202,
    ]  # fmt: skip
    params = sql_batch.keyed_params(conn.vendor, [expire_row], [ending.work_item_id])
    answers = []
    for statement in sql_batch.lease_expire_mark(conn.vendor, 1):
        answers += fetch(conn, statement, params)
    assert [a[5] for a in answers if a[0] == "alert"] == [990_202]
    born = fetch(
        conn,
        f"SELECT dedupe_key, folded_into_id, resolved_at_ms FROM {Alert._meta.db_table} "
        "WHERE folded_into_id IS NOT NULL ORDER BY id",
    )
    assert born == [
        (f"jeopardy:{marked.id}:1", 990_201, now),
        (f"expired:{ending.id}:1", 990_202, now),
    ]


def test_lease_expire_mark_expires_only_unchanged_leases_and_opens_each_alert_once(conn):
    now = db_now(conn)
    holder, _, _ = scene(conn, now)
    items = work_items(conn, now, 990_400, "expire", 3)
    due = {"state": Lease.State.JEOPARDY, "jeopardy_at_ms": now - 4_500,
           "expires_at_ms": now - 500, "due_at_ms": now - 500}  # fmt: skip
    fresh, alerted, renewed = (lease(items[n], holder, now, 1, **due) for n in range(3))
    insert(conn, fresh, alerted, renewed)
    # `fresh` has its open jeopardy alert, which the expiry resolves; `alerted` has its
    # expiry alert already (another sweep, or a lazy expiry, raised it), not opened again.
    jeopardy_key, expired_key = f"jeopardy:{fresh.id}:1", f"expired:{alerted.id}:1"
    for n, (key, kind, of) in enumerate(
        [(jeopardy_key, "jeopardy", fresh), (expired_key, "expired", alerted)]
    ):
        insert(conn, Alert(id=990_101 + n, kind=kind, dedupe_key=key, message="earlier",
                           detail={}, opened_at_ms=now - 4_000, lease_id=of.id,
                           work_item_id=of.work_item_id, epoch=1))  # fmt: skip

    def row(claimed: Lease, renewed_at_ms: int) -> list[Any]:
        return [
            lease_id(conn, claimed.id), claimed.work_item_id, claimed.state, claimed.epoch,
            renewed_at_ms, claimed.expires_at_ms, claimed.due_at_ms, "expired",
            f"expired:{claimed.id}:1", f"jeopardy:{claimed.id}:1",
            f"message {claimed.work_item_id}",
            json.dumps({"holder": holder.name, "holder_kind": holder.kind}), now, None,
        ]  # fmt: skip

    # The caller read `renewed` before its renewal landed: its version no longer matches.
    rows = [row(fresh, fresh.renewed_at_ms), row(alerted, alerted.renewed_at_ms)]
    rows.append(row(renewed, renewed.renewed_at_ms - 1))
    params = sql_batch.keyed_params(conn.vendor, rows, [item.id for item in items])
    answers = []
    for statement in sql_batch.lease_expire_mark(conn.vendor, len(rows)):
        answers += fetch(conn, statement, params)
    leases = {Lease._meta.pk.to_python(a[1]): a for a in answers if a[0] == "lease"}
    assert set(leases) == {fresh.id, alerted.id}
    for ended in (fresh, alerted):  # ended when validity ended, not when swept
        assert leases[ended.id][2:4] == (ended.work_item_id, now - 500)
    ((_, alert_id, _, alert_due, alert_kind, burst),) = [a for a in answers if a[0] == "alert"]
    assert (alert_due, alert_kind, burst) == (now - 500, "expired", None)

    ended_rows = fetch(
        conn,
        f"SELECT state, ended_at_ms, end_reason, ended_by_id FROM {Lease._meta.db_table} "
        "WHERE id IN (%s, %s)",
        [lease_id(conn, fresh.id), lease_id(conn, alerted.id)],
    )
    assert sorted(ended_rows) == [("expired", now - 500, "ttl elapsed", None)] * 2
    assert lease_row(conn, renewed.id)["state"] == "jeopardy"
    events = fetch(conn, f"SELECT lease_id, kind, at_ms, detail FROM {LeaseEvent._meta.db_table}")
    assert {Lease._meta.pk.to_python(e[0]) for e in events} == {fresh.id, alerted.id}
    for _, kind, at_ms, detail in events:
        assert (kind, at_ms) == ("expired", now - 500)
        detail = json.loads(detail) if isinstance(detail, str) else detail
        assert detail == {"reason": "ttl elapsed", "materialized_at_ms": now}
    alerts = fetch(
        conn,
        f"SELECT id, dedupe_key, message, detail, opened_at_ms, resolved_at_ms "
        f"FROM {Alert._meta.db_table} ORDER BY id",
    )
    by_key = {a[1]: a for a in alerts}
    assert set(by_key) == {jeopardy_key, expired_key, f"expired:{fresh.id}:1"}
    assert by_key[jeopardy_key][5] == now  # the jeopardy it supersedes, resolved
    assert by_key[expired_key][2:6:3] == ("earlier", None)  # not opened again, untouched
    opened = by_key[f"expired:{fresh.id}:1"]
    assert (opened[0], opened[2], opened[4], opened[5]) == (
        int(alert_id),
        "message 990400",
        now,
        None,
    )
    detail = json.loads(opened[3]) if isinstance(opened[3], str) else opened[3]
    assert detail == {"holder": "sql-holder", "holder_kind": "agent"}


def test_executor_active_shared_reads_the_flag_and_nothing_for_a_missing_executor(conn):
    holder, other, _ = scene(conn, db_now(conn))
    with conn.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Executor._meta.db_table} SET is_active = %s WHERE id = %s", [False, other.id]
        )
    statement = sql.executor_active_shared(conn.vendor)
    assert [bool(r[0]) for r in fetch(conn, statement, [holder.id])] == [True]
    assert [bool(r[0]) for r in fetch(conn, statement, [other.id])] == [False]
    assert fetch(conn, statement, [990_999]) == []


def test_lease_grant_raises_the_epoch_and_writes_the_lease_and_its_event_or_nothing(conn):
    now = db_now(conn)
    holder, other, item = scene(conn, now)
    with conn.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Executor._meta.db_table} SET is_active = %s WHERE id = %s", [False, other.id]
        )

    def grant(who: Executor, epoch: int, *, require_active: bool = True) -> tuple[Lease, bool]:
        granted = lease(item, who, now, epoch)
        event = LeaseEvent(
            lease=granted,
            work_item=item,
            epoch=epoch,
            kind=LeaseEvent.Kind.GRANTED,
            at_ms=now,
            detail={"by": who.name},
        )
        return granted, grant_write(conn, granted, event, require_active=require_active)

    def state() -> tuple[list[tuple], list[tuple], list[tuple]]:
        return (
            fetch(conn, f"SELECT epoch FROM {WorkItem._meta.db_table} WHERE id = %s", [item.id]),
            fetch(conn, f"SELECT epoch, holder_id FROM {Lease._meta.db_table} ORDER BY epoch"),
            fetch(conn, f"SELECT epoch, kind FROM {LeaseEvent._meta.db_table} ORDER BY epoch"),
        )

    first, made = grant(holder, 10)
    assert made and not first._state.adding
    assert state() == ([(10,)], [(10, holder.id)], [(10, "granted")])
    _, made = grant(other, 11)  # a deactivated agent: nothing at all is written
    assert not made
    assert state() == ([(10,)], [(10, holder.id)], [(10, "granted")])
    with conn.cursor() as cursor:  # the first lease ends (one live lease per work item)
        cursor.execute(
            f"UPDATE {Lease._meta.db_table} SET state = 'released', ended_at_ms = %s", [now]
        )
    _, made = grant(other, 11, require_active=False)  # no check asked (a person's grant)
    assert made
    assert state()[0] == [(11,)] and len(state()[1]) == len(state()[2]) == 2


def test_epoch_mark_upsert_raises_the_mark_and_refuses_a_lower_epoch(conn):
    statement = sql.epoch_mark_upsert(conn.vendor, EpochMark._meta.db_table)
    assert fetch(conn, statement, ["sql-mark", 0, 3]) == [(0, 3)]  # first sight: the mark is 3
    assert fetch(conn, statement, ["sql-mark", 0, 3]) == [(0, 3)]  # the same holder again
    assert fetch(conn, statement, ["sql-mark", 0, 2]) == []  # a stale epoch: refused
    assert fetch(conn, statement, ["sql-mark", 0, 5]) == [(0, 5)]
    marks = fetch(
        conn, f"SELECT high_water FROM {EpochMark._meta.db_table} WHERE work_key = %s", ["sql-mark"]
    )
    assert marks == [(5,)]


def test_epoch_mark_upsert_orders_generation_before_epoch(conn):
    # docs/design.md §5: after a failover, a lower epoch of a higher generation outranks.
    statement = sql.epoch_mark_upsert(conn.vendor, EpochMark._meta.db_table)
    assert fetch(conn, statement, ["sql-gen", 0, 7]) == [(0, 7)]
    assert fetch(conn, statement, ["sql-gen", 1, 3]) == [(1, 3)]
    assert fetch(conn, statement, ["sql-gen", 0, 9]) == []  # an older generation: refused
    assert fetch(conn, statement, ["sql-gen", 1, 2]) == []
    assert fetch(conn, statement, ["sql-gen", 1, 3]) == [(1, 3)]


def test_epoch_mark_upsert_refuses_a_table_name_that_is_not_an_identifier():
    for vendor in sql.VENDORS:
        with pytest.raises(ValueError):
            sql.epoch_mark_upsert(vendor, "marks; DROP TABLE core_lease")


# --- reads compiled once (leaseboard.core.compiled), on both databases --------------------


def _lease_with_item_and_holder(lease_id: uuid.UUID, marker: int) -> Any:
    from django.db.models import OuterRef, Subquery, Value

    return (
        Lease.objects.select_for_update(no_key=True, of=("self",))
        .filter(id=lease_id)
        .annotate(
            marker=Value(marker),
            first_event=Subquery(LeaseEvent.objects.filter(lease=OuterRef("pk")).values("id")[:1]),
        )
        .values_list(
            *attnames(Lease),
            *attnames(WorkItem, "work_item__"),
            *attnames(Executor, "holder__"),
            "marker",
            "first_event",
        )
    )


LEASE_READ = CompiledRead(
    _lease_with_item_and_holder,
    (uuid.UUID(int=0x7E57), -424_242),
    Lease,
    related=(("work_item", WorkItem), ("holder", Executor)),
)


def test_a_compiled_read_makes_the_instances_the_orm_would(conn):
    now = db_now(conn)
    holder, _, item = scene(conn, now)
    written = lease(item, holder, now, 9)
    model_insert(written, using=conn)  # the compiled insert, read back below
    found = LEASE_READ.row(written.id, 7, using=conn)
    assert found is not None
    read, extra = found
    assert isinstance(read, Lease) and read.id == written.id  # a UUID on both databases
    for field in Lease._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(written, field.attname), field.name
    assert read.work_item.key == "sql-dialects" and read.work_item.epoch == 9
    assert read.work_item.scope == {}  # JSON decoded by the field's converter
    assert read.holder.name == "sql-holder" and read.holder.kind == "agent"
    assert extra == [7, None]  # annotations, in order; each call's own marker
    assert LEASE_READ.row(written.id, 8, using=conn)[1] == [8, None]  # type: ignore[index]
    assert LEASE_READ.row(uuid.uuid4(), 7, using=conn) is None


def test_a_compiled_read_refuses_a_sentinel_it_cannot_place(conn):
    twice = CompiledRead(
        lambda key: WorkItem.objects.filter(key=key, queue__name=key).values_list("id"),
        ("sentinel:twice",),
        WorkItem,
    )
    with pytest.raises(AssertionError, match="appears 2 times"):
        twice.values("x", using=conn)


def test_a_compiled_insert_refuses_a_model_whose_key_the_database_makes(conn):
    with pytest.raises(TypeError, match="database-made key"):
        model_insert(Queue(name="q"), using=conn)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_hot_paths_statements_are_prepared_after_a_few_runs(agent):
    from leaseboard.core.services.leases import lease_renew
    from tests.builders import leased_item

    executor, _ = agent()
    lease = leased_item(executor, "sql-prepared")
    for _ in range(6):  # psycopg prepares a statement on its 5th run on a connection
        lease_renew(lease_id=lease.id, executor=executor, epoch=lease.epoch)
    for _ in range(6):  # Django's own cursors bind on the client and never prepare
        assert Lease.objects.filter(id=lease.id, epoch=lease.epoch).exists()
    prepared = [
        row[0] for row in fetch(pg_connection, "SELECT statement FROM pg_prepared_statements")
    ]
    assert any("UPDATE core_lease AS l SET renewed_at_ms" in text for text in prepared)
    assert not any('"core_lease"."epoch" =' in text for text in prepared)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_last_hour_s_expiries_are_counted_in_end_order_whatever_the_statistics_say():
    """Statistics taken before an expiry storm say no lease has expired; PostgreSQL then
    planned the live page's expired counter over lease_holder_state_idx, reading every
    expired lease and sorting them (make storm: up to 34,634 buffers a statement). Over
    lease_expired_ended_idx it walks the newest endings and stops at its cap."""
    from leaseboard.dashboard.selectors.counters import COUNTER_CAP, _counters_sql

    now = db_now(pg_connection)
    holder, other, _ = scene(pg_connection, now)
    items = many_work_items(now, 993_000, "sql-expired")
    Lease.objects.bulk_create(lease(item, other, now, 1) for item in items)
    with pg_connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Lease._meta.db_table}")  # before any lease expired
        cursor.execute(
            f"UPDATE {Lease._meta.db_table} SET state = 'expired', ended_at_ms = %s - "
            "(work_item_id %% 5000) WHERE work_item_id < %s",
            [now, 993_000 + 4_000],
        )
        cursor.execute("EXPLAIN (ANALYZE, TIMING OFF) " + _counters_sql())
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "lease_expired_ended_idx" in plan, plan
    assert "lease_holder_state_idx" not in plan, plan
    # Read in end order, the count stops at its cap: no sort of all 4,000.
    assert f"(actual rows={COUNTER_CAP + 1} loops=1)" in plan, plan
