"""Every SQL statement whose text differs between PostgreSQL and SQLite, both dialects side
by side, one function per statement. Callers pass `connection.vendor` and build the
parameters with Django's field preparation; nothing else in leaseboard branches on the
vendor. tests/test_sql.py runs each statement here on both databases.

Enum values appear in SQL only through `literal`, built from the domain enum.
"""

from __future__ import annotations

import functools
import re
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db.backends.utils import CursorDebugWrapper
from django.db.models import Model

from leaseboard.core.models.executors import Executor
from leaseboard.core.models.leases import RENEWAL_SLOT, RENEWAL_WINDOW, Lease
from leaseboard.core.models.work import WorkItem
from leaseboard.domain.certainty import Certainty
from leaseboard_recipient.guard import upsert_sql as recipient_guard_upsert_sql

POSTGRESQL = "postgresql"
SQLITE = "sqlite"
VENDORS = (POSTGRESQL, SQLITE)

# Table names are interpolated: plain identifiers only (they come from a model's db_table).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Enum values are plain lowercase words: as SQL literals they need no escaping anywhere.
_PLAIN_VALUE = re.compile(r"[a-z][a-z_]*")


def literal(value: StrEnum) -> str:
    """The SQL string literal for a stored enum value, e.g. `'active'`."""
    if not _PLAIN_VALUE.fullmatch(value.value):
        raise ValueError(f"not a plain enum value for SQL: {value.value!r}")
    return f"'{value.value}'"


def unsupported_vendor(vendor: str) -> NotImplementedError:
    return NotImplementedError(f"no SQL for database vendor {vendor!r}; use one of {VENDORS}")


def prepared_cursor(connection: Any) -> Any:
    """A cursor whose statements PostgreSQL prepares once they have run a few times on
    this connection (psycopg's server-side binding and its `prepare_threshold`, 5 unless
    DATABASE_URL says otherwise), wrapped as Django wraps its own (errors, query logging).
    For the hot paths' statements only: a statement here must type every parameter by its
    context or a cast (a bare string `%s` in a select list is text). The gate read of an
    acquire planned in 1.75 ms and ran in 0.3 ms; prepared, it is planned once per
    connection. SQLite: Django's own cursor."""
    if connection.vendor != POSTGRESQL:
        return connection.cursor()
    import psycopg

    connection.ensure_connection()
    raw = psycopg.Cursor(connection.connection)
    # As Django's own cursor(): logged when queries are (DEBUG, CaptureQueriesContext).
    if connection.queries_logged:
        return _PreparedDebugCursor(raw, connection)
    return connection.make_cursor(raw)


class _PreparedDebugCursor(CursorDebugWrapper):
    """Logs the statement's text with its placeholders: Django composes the executed SQL
    only for its own client-side cursors and would log None here."""

    def debug_sql(self, sql=None, params=None, use_last_executed_query=False, many=False):  # type: ignore[no-untyped-def]
        return super().debug_sql(sql, params, use_last_executed_query=False, many=many)


def now_ms(vendor: str) -> str:
    """The database's current time in integer milliseconds since the Unix epoch, plus the
    test-only offset `LEASEBOARD_DB_CLOCK_OFFSET_MS` (leaseboard.core.clock)."""
    if vendor == POSTGRESQL:
        # clock_timestamp(), not now(): now() is the transaction's start, which can lie
        # before a wait for a row lock, and a grant would then be dated before the end of
        # the lease it replaces. Services read the clock once, after taking their locks.
        expr = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint"
    elif vendor == SQLITE:
        expr = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    else:
        raise unsupported_vendor(vendor)
    offset = int(settings.LEASEBOARD_DB_CLOCK_OFFSET_MS)
    return f"({expr} + {offset})" if offset else expr


def lease_renew(vendor: str, n_rows: int) -> str:
    """Renew n leases of one holder in one compare-and-set UPDATE that sets an absolute
    expiry from the database clock. Fast path: stored state 'active' only; a lease the
    sweep moved to jeopardy renews through the slow path, which records the recovery.

    Parameters: `rows_params` of rows (lease id, epoch), then the holder's executor id.
    Rows returned: (lease id, epoch, expires_in_ms, hold_reason) for each lease renewed
    ("" when no operator holds it)."""
    window = RENEWAL_WINDOW * RENEWAL_SLOT
    if vendor == POSTGRESQL:
        recent = f"right(l.recent_renewals || lpad(c.n::text, 13, '0') || ',', {window})"
        least, greatest = "LEAST", "GREATEST"
        returning = "l.id, l.epoch, l.expires_at_ms - c.n, l.hold_reason"
    elif vendor == SQLITE:
        recent = f"substr(l.recent_renewals || printf('%%013d', c.n) || ',', -{window})"
        least, greatest = "min", "max"
        # SQLite's RETURNING cannot name FROM tables; renewed_at_ms is the same clock read.
        returning = "id, epoch, expires_at_ms - renewed_at_ms, hold_reason"
    else:
        raise unsupported_vendor(vendor)
    pairs = rows_source(vendor, ["uuid", "bigint"], n_rows, ["lid", "ep"])
    # `+l.holder_id`: the holder is checked, never used to find the rows (a unary plus on
    # the column keeps both planners off lease_holder_state_idx). A holder whose leases
    # were granted since the last ANALYZE is estimated at ~2 rows, and PostgreSQL then
    # drove the update from that index and matched the id list once per lease the holder
    # has: 500 of a holder's 12,500 leases took 1.1-1.5 s (6.25 M rows filtered) in the
    # expiry storm, against ~15 ms through the primary key (bench/storm.py).
    return (
        f"UPDATE {Lease._meta.db_table} AS l SET "
        f"renewed_at_ms = c.n, "
        f"expires_at_ms = {least}(c.n + l.ttl_ms, l.max_expires_at_ms), "
        f"jeopardy_at_ms = {least}(c.n + l.jeopardy_after_ms, l.max_expires_at_ms), "
        f"due_at_ms = {least}(c.n + l.jeopardy_after_ms, l.max_expires_at_ms), "
        f"renew_count = l.renew_count + 1, "
        f"max_gap_ms = {greatest}(l.max_gap_ms, c.n - l.renewed_at_ms), "
        f"recent_renewals = {recent} "
        f"FROM (SELECT {now_ms(vendor)} AS n) AS c, {pairs} "
        f"WHERE l.id = v.lid AND +l.holder_id = %s AND l.epoch = v.ep "
        f"AND l.state = {literal(Certainty.ACTIVE)} AND l.expires_at_ms > c.n "
        f"RETURNING {returning}"
    )


def executor_active_shared(vendor: str) -> str:
    """Whether an executor may be granted a lease: its `is_active`, read under a share lock
    on its row, so a grant and a quarantine (which updates the row) never pass each other:
    the grant waits for a quarantine in progress and then reads its answer, and the
    quarantine waits for a grant past this read, then revokes what it granted.

    Parameters: the executor's id. Returns one row (is_active,), none if it does not exist."""
    table = Executor._meta.db_table
    if vendor == POSTGRESQL:
        return f"SELECT is_active FROM {table} WHERE id = %s FOR SHARE"
    if vendor == SQLITE:
        # SQLite has no row locks: IMMEDIATE transactions already serialize every writer.
        return f"SELECT is_active FROM {table} WHERE id = %s"
    raise unsupported_vendor(vendor)


def epoch_mark_upsert(vendor: str, table: str) -> str:
    """A recipient's fencing-order check on a high-water-mark table (work_key, generation,
    high_water, updated_at): raise the mark to the presented (generation, epoch) unless it
    is higher already, compared lexicographically (docs/design.md §5).

    Parameters: work_key, generation, epoch. Returns the new mark (generation, high_water)
    when accepted, no row when refused."""
    if vendor == POSTGRESQL:
        # The shipped recipient guard's own statement, so the sandbox proves that one.
        return recipient_guard_upsert_sql(table)
    if vendor == SQLITE:
        if not _IDENTIFIER.fullmatch(table):
            raise ValueError(f"table must be a plain SQL identifier: {table!r}")
        # The same conditional upsert; SQLite has CURRENT_TIMESTAMP where PostgreSQL has now().
        return (
            f"INSERT INTO {table} AS mark (work_key, generation, high_water, updated_at) "
            "VALUES (%s, %s, %s, CURRENT_TIMESTAMP) ON CONFLICT (work_key) DO UPDATE "
            "SET generation = excluded.generation, high_water = excluded.high_water, "
            "updated_at = CURRENT_TIMESTAMP "
            "WHERE (mark.generation, mark.high_water) "
            "<= (excluded.generation, excluded.high_water) "
            "RETURNING generation, high_water"
        )
    raise unsupported_vendor(vendor)


# The fencing generation (docs/design.md §5): the timeline of the WAL this primary writes
# (the first 8 hex digits of its current WAL file's name) less one. It rises by one with
# every promotion (a new timeline), never with a restart in place, is right the moment the
# promoted server accepts writes (measured on PostgreSQL 15: tests/ha_generation), and can
# be read by the service's own role (pg_control_checkpoint() would lag until the next
# checkpoint). Less one: a cluster never failed over (timeline 1) is generation 0, so its
# tokens are spelled as before generations existed and older recipients keep reading them.
# Only a primary can run it, and only a primary grants. SQLite has no failover: 0.
GENERATION_SQL = "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint - 1"


def _filled_by_sql(model: type[Model], attname: str, vendor: str) -> str | None:
    """The SQL expression that fills an insert column of `lease_grant` in the statement
    itself instead of a parameter (the lease's generation), or None."""
    if model is Lease and attname == "generation":
        return GENERATION_SQL if vendor == POSTGRESQL else "0"
    return None


def _insert_columns(model: type[Model], vendor: str) -> tuple[list[str], list[str]]:
    """A model's concrete columns but an auto-increment key, and a typed placeholder for
    each (an INSERT … SELECT gives untyped literals no column type to take)."""
    from django.db import connections

    conn = connections["default"]
    columns, placeholders = [], []
    for field in model._meta.concrete_fields:
        if field.primary_key and field.get_internal_type() in {"AutoField", "BigAutoField"}:
            continue
        columns.append(field.column)
        expression = _filled_by_sql(model, field.attname, vendor)
        if expression is not None:
            placeholders.append(expression)
            continue
        # django-stubs lacks Field.cast_db_type
        cast = field.cast_db_type(conn) if vendor == POSTGRESQL else None  # type: ignore[attr-defined]
        placeholders.append(f"CAST(%s AS {cast})" if cast else "%s")
    return columns, placeholders


@functools.cache  # built per vendor once: every acquire, takeover and assignment runs it
def lease_grant(vendor: str) -> list[str]:
    """A grant's writes — the holder's `is_active` read under a share lock (see
    executor_active_shared), the work item's epoch raised, the lease and its `granted`
    event inserted — in one statement on PostgreSQL (SQLite: four, in its IMMEDIATE
    transaction that already serializes every writer). Nothing is written unless the
    holder is active, or when it is not an agent.

    Parameters, in order over the statements: executor id, whether to require it active,
    the new epoch, the work item id, then every insert column of the lease, then every
    insert column of the event (`grant_columns`). The last statement returns one row, the
    event's id and the lease's generation (GENERATION_SQL, filled in the statement), when
    the grant was made, none when the holder is deactivated."""
    from leaseboard.core.models.leases import LeaseEvent

    table, item_table = Lease._meta.db_table, WorkItem._meta.db_table
    lease_cols, lease_vals = _insert_columns(Lease, vendor)
    event_cols, event_vals = _insert_columns(LeaseEvent, vendor)
    executors = Executor._meta.db_table
    if vendor == POSTGRESQL:
        return [
            f"WITH a AS (SELECT id FROM {executors} WHERE id = %s AND (is_active OR NOT %s) "
            f"FOR SHARE), "
            f"w AS (UPDATE {item_table} SET epoch = %s WHERE id = %s "
            f"AND EXISTS (SELECT 1 FROM a) RETURNING id), "
            f"l AS (INSERT INTO {table} ({', '.join(lease_cols)}) "
            f"SELECT {', '.join(lease_vals)} FROM w RETURNING id, generation) "
            f"INSERT INTO {LeaseEvent._meta.db_table} ({', '.join(event_cols)}) "
            f"SELECT {', '.join(event_vals)} FROM l RETURNING id, (SELECT generation FROM l)"
        ]
    if vendor == SQLITE:
        return [
            f"SELECT id FROM {executors} WHERE id = %s AND (is_active OR NOT %s)",
            f"UPDATE {item_table} SET epoch = %s WHERE id = %s",
            f"INSERT INTO {table} ({', '.join(lease_cols)}) VALUES ({', '.join(lease_vals)})",
            f"INSERT INTO {LeaseEvent._meta.db_table} ({', '.join(event_cols)}) "
            f"VALUES ({', '.join(event_vals)}) RETURNING id, 0",
        ]
    raise unsupported_vendor(vendor)


@functools.cache
def grant_columns(model: type[Model]) -> list[str]:
    """The attribute names whose values fill `lease_grant`'s insert columns of `model`."""
    return [
        f.attname
        for f in model._meta.concrete_fields
        if not (f.primary_key and f.get_internal_type() in {"AutoField", "BigAutoField"})
        and _filled_by_sql(model, f.attname, POSTGRESQL) is None
    ]


def rows_source(vendor: str, types: list[str], n_rows: int, names: list[str]) -> str:
    """A row source (for FROM or INSERT … SELECT) of `n_rows` rows whose columns are
    `names`, of PostgreSQL `types`. PostgreSQL: one array parameter per column, unnested,
    so a batch of 500 rows is a handful of parameters instead of thousands to interpolate
    and parse (one row: a typed VALUES row, which the planner knows is one row); SQLite: a
    VALUES list, a parameter per value. Build the parameters with `rows_params`."""
    if vendor == POSTGRESQL and n_rows == 1:
        row = ", ".join(f"%s::{t}" for t in types)
        return f"(VALUES ({row})) AS v({', '.join(names)})"
    if vendor == POSTGRESQL:
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        return f"unnest({arrays}) AS v({', '.join(names)})"
    if vendor == SQLITE:
        row = "(" + ", ".join(["%s"] * len(types)) + ")"
        values = ", ".join([row] * n_rows)
        selected = ", ".join(f"column{i + 1} AS {name}" for i, name in enumerate(names))
        return f"(SELECT {selected} FROM (VALUES {values})) AS v"
    raise unsupported_vendor(vendor)


def rows_params(vendor: str, rows: list[list[Any]]) -> list[Any]:
    """The parameters of `rows_source` for these rows (each a list of column values)."""
    if vendor == POSTGRESQL and len(rows) == 1:
        return list(rows[0])
    if vendor == POSTGRESQL:
        return [list(column) for column in zip(*rows, strict=True)] if rows else []
    if vendor == SQLITE:
        return [value for row in rows for value in row]
    raise unsupported_vendor(vendor)
