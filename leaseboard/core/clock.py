"""The database clock, the only clock for lease times (DESIGN §3).

Times are integer milliseconds since the Unix epoch as the database sees them. A test-only
offset (`LEASEBOARD_DB_CLOCK_OFFSET_MS`) is added in SQL, so every reader of the clock in
this process agrees on the shifted time.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, Func


def now_ms_sql(vendor: str | None = None) -> str:
    """A SQL expression for the database's current time in milliseconds (offset included)."""
    vendor = vendor or connection.vendor
    offset = int(settings.LEASEBOARD_DB_CLOCK_OFFSET_MS)
    if vendor == "postgresql":
        # clock_timestamp(), not now(): now() is the transaction's start, which can lie
        # before a wait for a row lock, and a grant would then be dated before the end of
        # the lease it replaces. Services read the clock once, after taking their locks.
        expr = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint"
    elif vendor == "sqlite":
        expr = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    else:  # pragma: no cover - only the two supported back ends
        raise NotImplementedError(vendor)
    return f"({expr} + {offset})" if offset else expr


def db_now_ms() -> int:
    """Read the database clock once, after the locks a decision needs; pass it down."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {now_ms_sql()}")
        return int(cursor.fetchone()[0])


class DbNowMs(Func):
    """ORM expression for the database clock in milliseconds."""

    output_field = BigIntegerField()

    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        return now_ms_sql(connection.vendor), []
