"""When the database cannot answer (docs/design.md §14): which errors mean "unavailable, nothing
was changed, retry", why, and failing fast while it stays so.

- `database_unavailable(exc)`: an operational or interface error (refused, timed out,
  dropped, statement or lock timeout, deadlock, serialization failure), from Django's
  wrappers or psycopg itself. Everything else unexpected is an internal error.
- `breaker`: after a connection-level failure (no server answer at all), this process
  answers 503 at once for LEASEBOARD_DB_RETRY_AFTER_S instead of letting every request wait
  out a connect timeout against a dead or frozen server; then one request tries again.
  Statement and lock timeouts do not trip it: the server answered, the request was slow.
  Nor does one request cut at its deadline: a frozen server and an overloaded one look the
  same to one request, and opening on the first cut turned a moment of overload into a
  second of 503s for every request of the process (renewals included). CUTS_TO_OPEN cuts
  in a row, with no request answered in between, do open it: a frozen server answers none.
  Each failure also ends a generation: a persistent connection opened before it (another
  thread's, idle through a restart) is closed before its next request uses it
  (`discard_if_suspect`), so a database that came back answers every thread, not only the
  one that found it back.
- `long_bounds()`: the longer timeouts for sweeps, retention and config apply, as
  `SET LOCAL` inside their transaction (safe with persistent connections, prepared
  statements and a transaction-pooling PgBouncer: nothing outlives the transaction).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)

# SQLSTATEs that mean the server answered but this request was too slow or lost a race.
STATEMENT_TIMEOUT, LOCK_TIMEOUT = "57014", "55P03"
CONTENTION = frozenset({"40P01", "40001"})  # deadlock, serialization failure

# Deadline cuts in a row, with no request answered in between, that open the breaker.
CUTS_TO_OPEN = 3


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = 0
    while exc is not None and seen < 10:
        yield exc
        exc = exc.__cause__ or exc.__context__
        seen += 1


def database_unavailable(exc: BaseException | None) -> bool:
    """Is `exc` (or what it was raised from) the database failing to answer?"""
    return any(isinstance(e, UNAVAILABLE_ERRORS) for e in _chain(exc))


def _sqlstate(exc: BaseException | None) -> str | None:
    for e in _chain(exc):
        state = getattr(e, "sqlstate", None)
        if state:
            return str(state)
    return None


def unavailable_reason(exc: BaseException | None) -> str:
    """`statement_timeout`, `lock_timeout`, `contention` or `unreachable`."""
    state = _sqlstate(exc)
    if state == STATEMENT_TIMEOUT:
        return "statement_timeout"
    if state == LOCK_TIMEOUT:
        return "lock_timeout"
    if state in CONTENTION:
        return "contention"
    return "unreachable"


REASON_TEXT = {
    "statement_timeout": "the database did not finish a statement within the statement timeout",
    "lock_timeout": "a row this request needs stayed locked past the lock timeout",
    "contention": "the database aborted this request's transaction in a conflict",
    "unreachable": "the database is unreachable or stopped answering",
    "deadline": "the database did not answer within this request's deadline",
    "commit_unknown": (
        "the database stopped answering while this request's commit was in flight, so it "
        "may or may not have been applied: read the state before acting on it"
    ),
}


class Breaker:
    """Per process: open for LEASEBOARD_DB_RETRY_AFTER_S after a connection-level
    failure; while open, `allow()` lets one request through per interval to try again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open_until = 0.0
        self.opened = 0  # times it opened, for tests and logs
        # Bumped by every connection-level failure: connections stamped with an older one
        # are suspect.
        self.generation = 0
        self._cuts = 0  # deadline cuts since a request was last answered

    def allow(self) -> bool:
        if not self._open_until:
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._open_until:
                return False
            # This request is the probe; the others wait another interval.
            self._open_until = now + settings.LEASEBOARD_DB_RETRY_AFTER_S
            return True

    def failed(self, exc: BaseException | None, *, deadline: bool = False) -> None:
        """A request met the database failing: a connection-level failure opens the
        breaker (and ends a generation of connections); a deadline cut opens it only as
        the CUTS_TO_OPEN-th in a row."""
        if deadline:
            with self._lock:
                self._cuts += 1
                if self._cuts < CUTS_TO_OPEN:
                    return
                self._open()
            return
        if unavailable_reason(exc) != "unreachable":
            return
        with self._lock:
            self.generation += 1
            self._open()

    def _open(self) -> None:
        if not self._open_until:
            self.opened += 1
        self._open_until = time.monotonic() + settings.LEASEBOARD_DB_RETRY_AFTER_S

    def succeeded(self) -> None:
        if self._open_until or self._cuts:
            with self._lock:
                self._open_until = 0.0
                self._cuts = 0

    @property
    def is_open(self) -> bool:
        return bool(self._open_until) and time.monotonic() < self._open_until

    def reset(self) -> None:
        with self._lock:
            self._open_until = 0.0
            self._cuts = 0


breaker = Breaker()


def _stamp(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    connection.lb_generation = breaker.generation  # type: ignore[attr-defined]


connection_created.connect(_stamp, dispatch_uid="leaseboard.dbfaults.stamp")


def discard_if_suspect(db: BaseDatabaseWrapper) -> bool:
    """Close `db`'s persistent connection if it was opened before the last connection-level
    failure this process saw: it may be a socket to a server that has since restarted, and
    using it would fail one more request (and reopen the breaker) against a database that is
    back. Closed, not pinged: a ping to a frozen server would hang. Costs one new connection
    per thread after a failure and nothing otherwise. True when it closed one."""
    if db.connection is None or getattr(db, "lb_generation", 0) >= breaker.generation:
        return False
    db.close()
    return True


def failure_seen(request: object, exc: BaseException | None) -> str:
    """Record that `request` met the database failing (a connection-level failure
    discards its connection and opens the breaker); returns the reason to tell."""
    deadline = getattr(request, "lb_deadline", None)
    if deadline is None:
        breaker.failed(exc)
        return unavailable_reason(exc)
    breaker.failed(exc, deadline=deadline.fired)
    if deadline.fired:
        deadline.broken = True
        return "commit_unknown" if deadline.phase == "commit" else "deadline"
    reason = unavailable_reason(exc)
    # A statement or lock timeout leaves a good connection (Django pings it at the end of
    # the request); a connection-level failure does not.
    deadline.broken = reason == "unreachable"
    return reason


def long_bounds() -> None:
    """Inside a transaction: its statements and lock waits from here on get the long
    timeouts (LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS, LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS)
    instead of the hot paths' connection defaults, until it ends."""
    if connection.vendor == "postgresql" and connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('statement_timeout', %s, true), "
                "set_config('lock_timeout', %s, true)",
                [
                    str(settings.LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS),
                    str(settings.LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS),
                ],
            )
