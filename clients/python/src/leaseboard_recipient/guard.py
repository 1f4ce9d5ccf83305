"""Per-work-item fencing-order high-water marks: refuse an order below the mark, raise it
otherwise.

The order is (generation, epoch), compared lexicographically (docs/design.md §5): the
generation rises with every promotion of a new database primary, so a grant the old primary
made and lost outranks nothing its successor grants. Marks written before generations
existed are generation 0 and keep working: a PostgreSQL table without the `generation`
column gets it (`ensure_schema`, or `schema_sql` in a migration) with default 0, and a
Redis mark stored as a bare epoch reads as generation 0.

Back ends: PostgreSQL (one `INSERT … ON CONFLICT … WHERE` statement, usable inside the
recipient's own transaction), Redis (one Lua script) and in-memory (tests, demos).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

DEFAULT_TABLE = "leaseboard_epoch_guard"
DEFAULT_REDIS_PREFIX = "leaseboard:epoch:"

# Table names are interpolated into SQL, so only plain (optionally schema-qualified) names.
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


@dataclass(frozen=True)
class GuardResult:
    accepted: bool
    # The mark's epoch after this check: with `generation`, the mark (generation,
    # high_water) is >= the presented order when accepted, > it when refused.
    high_water: int
    generation: int = 0

    @property
    def order(self) -> tuple[int, int]:
        return (self.generation, self.high_water)


@runtime_checkable
class EpochGuard(Protocol):
    def check_and_advance(self, work_key: str, epoch: int, *, generation: int = 0) -> GuardResult:
        """Atomically refuse (generation, epoch) below the mark, else raise the mark to it.

        An order equal to the mark is accepted: one holder makes several effects.
        """
        ...


def _check_int(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ValueError(f"{name} must be a non-negative 64-bit integer")


def _check_args(work_key: str, epoch: int, generation: int = 0) -> None:
    if not isinstance(work_key, str) or not work_key:
        raise ValueError("work_key must be a non-empty string")
    _check_int("epoch", epoch)
    _check_int("generation", generation)


def _check_table(table: str) -> str:
    if not _IDENTIFIER.match(table):
        raise ValueError(f"table must be a plain SQL identifier (schema.table allowed): {table!r}")
    return table


def upsert_sql(table: str) -> str:
    """The check's statement (PostgreSQL); parameters work_key, generation, epoch; returns
    (generation, high_water) when accepted, no row when refused. Public so a host that
    runs the check on its own cursor (leaseboard.core.sql) runs exactly this."""
    table = _check_table(table)
    # The WHERE makes the update conditional (a row comparison is lexicographic); a refused
    # row is still locked by ON CONFLICT, so inside a transaction a newer order waits for
    # our commit instead of racing it.
    return (
        f"INSERT INTO {table} AS guard (work_key, generation, high_water) VALUES (%s, %s, %s) "
        "ON CONFLICT (work_key) DO UPDATE "
        "SET generation = EXCLUDED.generation, high_water = EXCLUDED.high_water, "
        "updated_at = now() "
        "WHERE (guard.generation, guard.high_water) <= (EXCLUDED.generation, EXCLUDED.high_water) "
        "RETURNING generation, high_water"
    )


def check_in(
    cursor: Any,
    work_key: str,
    epoch: int,
    *,
    generation: int = 0,
    table: str = DEFAULT_TABLE,
) -> GuardResult:
    """The fencing-order check inside the caller's transaction (psycopg or Django cursor).

    Accepted: the mark is raised and the row stays locked until the caller commits or rolls
    back, so the recipient's write and the mark commit (or vanish) together, and a newer
    holder's check waits for this transaction. Refused: write nothing.
    """
    _check_args(work_key, epoch, generation)
    table = _check_table(table)
    cursor.execute(upsert_sql(table), (work_key, generation, epoch))
    row = cursor.fetchone()
    if row is not None:
        return GuardResult(accepted=True, generation=int(row[0]), high_water=int(row[1]))
    # Refused: read the mark only to report it; the decision was the statement above.
    cursor.execute(f"SELECT generation, high_water FROM {table} WHERE work_key = %s", (work_key,))
    row = cursor.fetchone()
    if row is None:
        return GuardResult(accepted=False, generation=generation, high_water=epoch + 1)
    return GuardResult(accepted=False, generation=int(row[0]), high_water=int(row[1]))


def schema_sql(table: str = DEFAULT_TABLE) -> str:
    """DDL for the guard table (also usable in a Django migration's RunSQL): creates it,
    and adds the `generation` column (default 0) to a table made before generations."""
    table = _check_table(table)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "work_key text PRIMARY KEY, "
        "generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0), "
        "high_water bigint NOT NULL CHECK (high_water >= 0), "
        "updated_at timestamptz NOT NULL DEFAULT now()); "
        f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS "
        "generation bigint NOT NULL DEFAULT 0 CHECK (generation >= 0)"
    )


class PostgresEpochGuard:
    """Epoch guard on PostgreSQL with psycopg 3.

    Give a conninfo string (each thread gets its own autocommit connection) or an open
    psycopg connection (shared under a lock; each check is its own transaction, or a
    savepoint if the connection is already in one).
    """

    def __init__(self, conn: Any, *, table: str = DEFAULT_TABLE) -> None:
        self.table = _check_table(table)
        self._conninfo: str | None = conn if isinstance(conn, str) else None
        self._shared = None if isinstance(conn, str) else conn
        self._lock = threading.Lock()
        self._local = threading.local()
        self._opened: list[Any] = []

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            import psycopg  # lazy: the recipient package must import without psycopg

            conn = psycopg.connect(self._conninfo or "", autocommit=True)
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def ensure_schema(self) -> None:
        self._run(lambda cur: cur.execute(schema_sql(self.table)))

    def check_and_advance(self, work_key: str, epoch: int, *, generation: int = 0) -> GuardResult:
        return self._run(
            lambda cur: check_in(cur, work_key, epoch, generation=generation, table=self.table)
        )

    def check_in(
        self, cursor: Any, work_key: str, epoch: int, *, generation: int = 0
    ) -> GuardResult:
        """See module-level `check_in`; uses this guard's table."""
        return check_in(cursor, work_key, epoch, generation=generation, table=self.table)

    def high_water(self, work_key: str) -> int | None:
        """The mark's epoch (see `mark` for the whole order)."""
        mark = self.mark(work_key)
        return mark[1] if mark else None

    def mark(self, work_key: str) -> tuple[int, int] | None:
        """The mark (generation, epoch), or None if this work item was never seen."""

        def read(cur: Any) -> tuple[int, int] | None:
            cur.execute(
                f"SELECT generation, high_water FROM {self.table} WHERE work_key = %s",
                (work_key,),
            )
            row = cur.fetchone()
            return (int(row[0]), int(row[1])) if row else None

        return self._run(read)

    def _run(self, fn: Callable[[Any], T]) -> T:
        if self._shared is None:
            conn = self._connection()
            # One transaction so the refused-path SELECT sees the row the upsert locked.
            with conn.transaction(), conn.cursor() as cur:
                return fn(cur)
        with self._lock, self._shared.transaction(), self._shared.cursor() as cur:
            return fn(cur)

    def close(self) -> None:
        """Close the connections this guard opened (never a connection it was given)."""
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()


# KEYS[1] = mark key, ARGV[1] = generation, ARGV[2] = epoch. Returns {accepted (0/1),
# generation, high_water}. A mark is "E" at generation 0 (as every mark written before
# generations existed, and readable by older guards) and "G:E" above it.
# Lua numbers are doubles: exact below 2^53, which no counter will reach.
_LUA_CHECK_AND_ADVANCE = """
local current = redis.call('GET', KEYS[1])
local generation = tonumber(ARGV[1])
local epoch = tonumber(ARGV[2])
if current then
  local g, e = 0, nil
  local sep = string.find(current, ':', 1, true)
  if sep then
    g = tonumber(string.sub(current, 1, sep - 1))
    e = tonumber(string.sub(current, sep + 1))
  else
    e = tonumber(current)
  end
  if g > generation or (g == generation and e > epoch) then
    return {0, g, e}
  end
end
if generation == 0 then
  redis.call('SET', KEYS[1], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
end
return {1, generation, epoch}
"""


def _redis_mark(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else str(value)
    generation, _, epoch = text.rpartition(":")
    return (int(generation or 0), int(epoch))


class RedisEpochGuard:
    """Fencing-order guard on Redis: one Lua script per check, atomic on the server.

    Marks never expire (an expired mark would let an old order back in), so run Redis with
    persistence. Unlike `check_in` on PostgreSQL, the mark cannot commit together with a
    write in another store: prefer PostgreSQL when the recipient's data lives there.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_REDIS_PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._script = client.register_script(_LUA_CHECK_AND_ADVANCE)

    def check_and_advance(self, work_key: str, epoch: int, *, generation: int = 0) -> GuardResult:
        _check_args(work_key, epoch, generation)
        if epoch >= 2**53 or generation >= 2**53:
            raise ValueError("epoch and generation must be below 2^53 for the Redis guard")
        accepted, mark_generation, high_water = self._script(
            keys=[self.prefix + work_key], args=[generation, epoch]
        )
        return GuardResult(
            accepted=bool(int(accepted)),
            generation=int(mark_generation),
            high_water=int(high_water),
        )

    def high_water(self, work_key: str) -> int | None:
        """The mark's epoch (see `mark` for the whole order)."""
        mark = self.mark(work_key)
        return mark[1] if mark else None

    def mark(self, work_key: str) -> tuple[int, int] | None:
        """The mark (generation, epoch), or None if this work item was never seen."""
        return _redis_mark(self.client.get(self.prefix + work_key))


class InMemoryEpochGuard:
    """Process-local guard for tests and single-process demos; not shared across processes."""

    def __init__(self) -> None:
        self._marks: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def check_and_advance(self, work_key: str, epoch: int, *, generation: int = 0) -> GuardResult:
        _check_args(work_key, epoch, generation)
        with self._lock:
            current = self._marks.get(work_key)
            if current is not None and current > (generation, epoch):
                return GuardResult(accepted=False, generation=current[0], high_water=current[1])
            self._marks[work_key] = (generation, epoch)
            return GuardResult(accepted=True, generation=generation, high_water=epoch)

    def high_water(self, work_key: str) -> int | None:
        with self._lock:
            mark = self._marks.get(work_key)
        return mark[1] if mark else None

    def mark(self, work_key: str) -> tuple[int, int] | None:
        with self._lock:
            return self._marks.get(work_key)
