"""The database clock, the only clock for lease times (docs/design.md §3).

Times are integer milliseconds since the Unix epoch as the database sees them. A test-only
offset (`LEASEBOARD_DB_CLOCK_OFFSET_MS`) is added in SQL, so every reader of the clock in
this process agrees on the shifted time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import BigIntegerField, Func

from leaseboard.core import sql

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler


def now_ms_sql(vendor: str | None = None) -> str:
    """A SQL expression for the database's current time in milliseconds (offset included);
    both dialects are in leaseboard.core.sql."""
    return sql.now_ms(vendor or connection.vendor)


def db_now_ms() -> int:
    """Read the database clock once, after the locks a decision needs; pass it down."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {now_ms_sql()}")
        return int(cursor.fetchone()[0])


class DbNowMs(Func):
    """ORM expression for the database clock in milliseconds."""

    output_field = BigIntegerField()

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> tuple[str, list[Any]]:
        return now_ms_sql(connection.vendor), []
