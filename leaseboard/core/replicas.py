"""Dashboard reads from a streaming replica (docs/deployment.md, "High availability").

With DATABASE_REPLICA_URL set, the views that opt in (`@reads_from_replica`: pages and
exports that only read) run their ORM reads on the `replica` database while its lag is
within LEASEBOARD_REPLICA_MAX_LAG_S, and on the primary past it or when the replica does
not answer. Everything else reads on the primary: writes, every authority decision (the
roles are read before the view by `role_required`, the lease, effect and takeover
services never opt in) and raw SQL on `connection` (the header's badges). The lag each
page was read at is shown on it ("as of 0.4 s ago").

The lag: zero plus the age of the last message from the primary when the replica has
replayed all it received and is streaming; else the age of the last replayed
transaction. Reading `pg_stat_wal_receiver` needs `pg_read_all_stats` (or a superuser).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase

log = logging.getLogger(__name__)
View = TypeVar("View", bound=Callable[..., HttpResponseBase])
REPLICA = "replica"
_reads_on: ContextVar[str] = ContextVar("leaseboard_reads_on", default=DEFAULT_DB_ALIAS)

LAG_SQL = """
SELECT pg_is_in_recovery(),
       (SELECT status FROM pg_stat_wal_receiver),
       extract(epoch FROM clock_timestamp()
               - (SELECT last_msg_receipt_time FROM pg_stat_wal_receiver)),
       pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn(),
       extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())
"""


@dataclass(frozen=True)
class ReplicaStatus:
    """Where a page's reads went and why. `lag_s` is the replica's lag when it was asked
    (None: not known); `reason` is `fresh`, `lagging`, `not_streaming`, `unreachable`, or
    `primary` (no replica configured)."""

    alias: str
    lag_s: float | None
    reason: str

    @property
    def on_replica(self) -> bool:
        return self.alias == REPLICA

    @property
    def words(self) -> str:
        """Why a page was read from the primary, for the page."""
        if self.reason == "lagging" and self.lag_s is not None:
            bound = settings.LEASEBOARD_REPLICA_MAX_LAG_S
            return f"is {self.lag_s:.1f} s behind (more than the {bound:g} s allowed)"
        return {"unreachable": "does not answer", "not_streaming": "is not streaming"}.get(
            self.reason, "is not used"
        )


PRIMARY = ReplicaStatus(DEFAULT_DB_ALIAS, None, "primary")


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


def lag_from(
    in_recovery: bool, status: str | None, receipt_age_s: Any, caught_up: bool, replay_age_s: Any
) -> float | None:
    """The lag from LAG_SQL's row (None: a standby that is not streaming, or unknown)."""
    if not in_recovery:
        return 0.0  # a primary (a promoted replica) is never behind itself
    if status != "streaming":
        return None
    receipt = None if receipt_age_s is None else max(0.0, float(receipt_age_s))
    if caught_up:
        return receipt
    replay = None if replay_age_s is None else max(0.0, float(replay_age_s))
    return max(v for v in (receipt, replay, 0.0) if v is not None)


def replica_status() -> ReplicaStatus:
    """Ask the replica how far behind it is; the alias a page's reads should use."""
    if not replica_configured():
        return PRIMARY
    conn = connections[REPLICA]
    try:
        with conn.cursor() as cursor:
            cursor.execute(LAG_SQL)
            lag = lag_from(*cursor.fetchone())
    except DatabaseError as exc:
        log.warning("replica unavailable, reading from the primary: %s", str(exc).split("\n")[0])
        conn.close()  # a failed connection is never reused
        return ReplicaStatus(DEFAULT_DB_ALIAS, None, "unreachable")
    if lag is None:
        return ReplicaStatus(DEFAULT_DB_ALIAS, None, "not_streaming")
    if lag > settings.LEASEBOARD_REPLICA_MAX_LAG_S:
        return ReplicaStatus(DEFAULT_DB_ALIAS, lag, "lagging")
    return ReplicaStatus(REPLICA, lag, "fresh")


@contextlib.contextmanager
def replica_reads(status: ReplicaStatus | None = None) -> Iterator[ReplicaStatus]:
    """ORM reads inside go to the replica when it is fresh enough (writes never do)."""
    status = status or replica_status()
    token = _reads_on.set(status.alias)
    try:
        yield status
    finally:
        _reads_on.reset(token)


def reads_from_replica(view: View) -> View:
    """For views that only read: their ORM reads (and a streamed export's, as it streams)
    go to the replica when fresh; `request.replica` says where they went, for the page."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not replica_configured() or request.method not in ("GET", "HEAD"):
            request.replica = PRIMARY  # type: ignore[attr-defined]
            return view(request, *args, **kwargs)
        with replica_reads() as status:
            request.replica = status  # type: ignore[attr-defined]
            response = view(request, *args, **kwargs)
        if (
            isinstance(response, StreamingHttpResponse)
            and not response.is_async  # WSGI: an iterator this thread advances
            and status.on_replica
        ):
            content = cast(Iterator[Any], response.streaming_content)
            response.streaming_content = _streamed_on(status, content)
        return response

    return cast(View, wrapped)


def _streamed_on(status: ReplicaStatus, content: Iterator[Any]) -> Iterator[Any]:
    """The export's generator advanced with its reads on the replica, chunk by chunk."""
    chunks = iter(content)
    while True:
        with replica_reads(status):
            chunk = next(chunks, _END)
        if chunk is _END:
            return
        yield chunk


_END = object()


class ReplicaRouter:
    """Django's router (DATABASE_ROUTERS): reads where `replica_reads` says, writes and
    migrations on the primary."""

    def db_for_read(self, model: Any, **hints: Any) -> str:
        return _reads_on.get()

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two copies of it

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS
