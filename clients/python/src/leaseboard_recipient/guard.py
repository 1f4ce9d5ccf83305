"""Per-work-item epoch high-water marks: refuse an epoch below the mark, raise it otherwise.

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
    high_water: int  # the mark after this check (>= epoch when accepted, > epoch when refused)


@runtime_checkable
class EpochGuard(Protocol):
    def check_and_advance(self, work_key: str, epoch: int) -> GuardResult:
        """Atomically refuse `epoch` below the mark, else raise the mark to `epoch`.

        An epoch equal to the mark is accepted: one holder makes several effects.
        """
        ...


def _check_args(work_key: str, epoch: int) -> None:
    if not isinstance(work_key, str) or not work_key:
        raise ValueError("work_key must be a non-empty string")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not 0 <= epoch < 2**63:
        raise ValueError("epoch must be a non-negative 64-bit integer")


def _check_table(table: str) -> str:
    if not _IDENTIFIER.match(table):
        raise ValueError(f"table must be a plain SQL identifier (schema.table allowed): {table!r}")
    return table


def upsert_sql(table: str) -> str:
    """The check's statement (PostgreSQL); parameters work_key, epoch. Public so a host
    that runs the check on its own cursor (leaseboard.core.sql) runs exactly this."""
    table = _check_table(table)
    # The WHERE makes the update conditional; a refused row is still locked by ON CONFLICT,
    # so inside a transaction a newer epoch waits for our commit instead of racing it.
    return (
        f"INSERT INTO {table} AS guard (work_key, high_water) VALUES (%s, %s) "
        "ON CONFLICT (work_key) DO UPDATE "
        "SET high_water = EXCLUDED.high_water, updated_at = now() "
        "WHERE guard.high_water <= EXCLUDED.high_water "
        "RETURNING high_water"
    )


def check_in(cursor: Any, work_key: str, epoch: int, *, table: str = DEFAULT_TABLE) -> GuardResult:
    """The epoch check inside the caller's transaction (psycopg or Django cursor).

    Accepted: the mark is raised and the row stays locked until the caller commits or rolls
    back, so the recipient's write and the mark commit (or vanish) together, and a newer
    holder's check waits for this transaction. Refused: write nothing.
    """
    _check_args(work_key, epoch)
    table = _check_table(table)
    cursor.execute(upsert_sql(table), (work_key, epoch))
    row = cursor.fetchone()
    if row is not None:
        return GuardResult(accepted=True, high_water=int(row[0]))
    # Refused: read the mark only to report it; the decision was the statement above.
    cursor.execute(f"SELECT high_water FROM {table} WHERE work_key = %s", (work_key,))
    row = cursor.fetchone()
    return GuardResult(accepted=False, high_water=int(row[0]) if row else epoch + 1)


def schema_sql(table: str = DEFAULT_TABLE) -> str:
    """DDL for the guard table (also usable in a Django migration's RunSQL)."""
    table = _check_table(table)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "work_key text PRIMARY KEY, "
        "high_water bigint NOT NULL CHECK (high_water >= 0), "
        "updated_at timestamptz NOT NULL DEFAULT now())"
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

    def check_and_advance(self, work_key: str, epoch: int) -> GuardResult:
        return self._run(lambda cur: check_in(cur, work_key, epoch, table=self.table))

    def check_in(self, cursor: Any, work_key: str, epoch: int) -> GuardResult:
        """See module-level `check_in`; uses this guard's table."""
        return check_in(cursor, work_key, epoch, table=self.table)

    def high_water(self, work_key: str) -> int | None:
        def read(cur: Any) -> int | None:
            cur.execute(f"SELECT high_water FROM {self.table} WHERE work_key = %s", (work_key,))
            row = cur.fetchone()
            return int(row[0]) if row else None

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


# KEYS[1] = mark key, ARGV[1] = epoch. Returns {accepted (0/1), high_water}.
# Lua numbers are doubles: exact for epochs below 2^53, which no counter will reach.
_LUA_CHECK_AND_ADVANCE = """
local current = redis.call('GET', KEYS[1])
local epoch = tonumber(ARGV[1])
if current and tonumber(current) > epoch then
  return {0, tonumber(current)}
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, epoch}
"""


class RedisEpochGuard:
    """Epoch guard on Redis: one Lua script per check, atomic on the server.

    Marks never expire (an expired mark would let an old epoch back in), so run Redis with
    persistence. Unlike `check_in` on PostgreSQL, the mark cannot commit together with a
    write in another store: prefer PostgreSQL when the recipient's data lives there.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_REDIS_PREFIX) -> None:
        self.client = client
        self.prefix = prefix
        self._script = client.register_script(_LUA_CHECK_AND_ADVANCE)

    def check_and_advance(self, work_key: str, epoch: int) -> GuardResult:
        _check_args(work_key, epoch)
        if epoch >= 2**53:
            raise ValueError("epoch too large for the Redis guard (2^53)")
        accepted, high_water = self._script(keys=[self.prefix + work_key], args=[epoch])
        return GuardResult(accepted=bool(int(accepted)), high_water=int(high_water))

    def high_water(self, work_key: str) -> int | None:
        value = self.client.get(self.prefix + work_key)
        return int(value) if value is not None else None


class InMemoryEpochGuard:
    """Process-local guard for tests and single-process demos; not shared across processes."""

    def __init__(self) -> None:
        self._marks: dict[str, int] = {}
        self._lock = threading.Lock()

    def check_and_advance(self, work_key: str, epoch: int) -> GuardResult:
        _check_args(work_key, epoch)
        with self._lock:
            current = self._marks.get(work_key)
            if current is not None and current > epoch:
                return GuardResult(accepted=False, high_water=current)
            self._marks[work_key] = epoch
            return GuardResult(accepted=True, high_water=epoch)

    def high_water(self, work_key: str) -> int | None:
        with self._lock:
            return self._marks.get(work_key)
