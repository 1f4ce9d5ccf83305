"""The live page's counters: the database clock and eight bounded counts in one query.

The pending-takeovers counter reads the takeover workflow's table, found by app label in
Django's app registry (as the templates find its URLs by name), so the dashboard imports
nothing from that app; without the app the counter shows "—".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import connection

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Effect, Lease
from leaseboard.core.sql import prepared_cursor

# Counters are exact up to this many, then shown as "1000+": each is a bounded scan.
COUNTER_CAP = 1_000
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Counters:
    active: int
    jeopardy: int
    expired_last_hour: int
    # None (rendered "—") when the takeover workflow is not installed.
    pending_takeovers: int | None = None
    # Work items with effects of no known outcome that nobody holds (selectors/blocked.py).
    needs_reconciliation: int = 0
    # Live by their row, expired by time, not yet ended by a sweep (within expired_last_hour).
    unswept: int = 0
    cap: int = COUNTER_CAP


def _bounded(sql_from_where: str, order_by: str = "") -> str:
    """Count the rows of `sql_from_where`, stopping at COUNTER_CAP+1. `order_by` names the
    index order to read them in, so the count starts where its rows are densest."""
    order = f" ORDER BY {order_by}" if order_by else ""
    return f"(SELECT count(*) FROM (SELECT 1 {sql_from_where}{order} LIMIT {COUNTER_CAP + 1}) AS b)"


def _pending_takeovers_table() -> str | None:
    """The takeover requests' table, looked up by app label: the dashboard counts the rows
    (over their partial unique index of pending requests) without importing the app."""
    if not apps.is_installed("leaseboard.takeovers"):
        return None
    return apps.get_model("takeovers", "TakeoverRequest")._meta.db_table


def live_counters() -> tuple[int, Counters]:
    """The database clock and the page counters in one query. Each count stops at
    COUNTER_CAP+1 rows, so its cost is bounded however many leases exist."""
    # The same text every poll: prepared once per connection, it skips ~1 ms of planning.
    with prepared_cursor(connection) as cursor:
        cursor.execute(_counters_sql())
        row = cursor.fetchone()
    return _counters_of(row)


def _counters_sql() -> str:
    """The one statement: the clock (`c.n`), then each bounded count over its index."""
    t = Lease._meta.db_table
    now = now_ms_sql()
    # Every live count walks lease_due_idx (due_at_ms over live leases, state and
    # expires_at_ms included) from the clock up or down, read from the index alone:
    # due_at_ms is jeopardy_at_ms while active and expires_at_ms once in jeopardy (so
    # due_at_ms <= expires_at_ms). The clock is a query parameter the planner cannot see;
    # the order keeps each count on the index, starting where its rows are, instead of a
    # scan of the table for rows that may not be there (84 ms of a search page at 100k
    # leases, docs/benchmarks.md). Worst case, a healthy fleet with nothing in jeopardy:
    # that count reads every live entry above the clock, ~6 ms at 100k.
    live = f"FROM {t} WHERE state IN ('active', 'jeopardy')"
    takeovers = _pending_takeovers_table()
    counts = [
        # Active, jeopardy not reached.
        _bounded(f"{live} AND state = 'active' AND due_at_ms > c.n", "due_at_ms"),
        # Active past its jeopardy time, not expired: newest first, just below the clock;
        # further down lie the leases already expired that no sweep has ended yet.
        _bounded(
            f"{live} AND state = 'active' AND due_at_ms <= c.n AND expires_at_ms > c.n",
            "due_at_ms DESC",
        ),
        # In jeopardy (marked by a sweep), not expired.
        _bounded(f"{live} AND state = 'jeopardy' AND due_at_ms > c.n", "due_at_ms"),
        # Over lease_expired_ended_idx (partial: expired): the last hour's expiries,
        # newest first, an ordered walk that stops at the cap, whatever the statistics say
        # (taken before a storm, they had it read every expired lease over the holder index).
        _bounded(
            f"FROM {t} WHERE state = 'expired' AND ended_at_ms >= c.n - {HOUR_MS}",
            "ended_at_ms DESC",
        ),
        # Expired by time, not yet materialized by a sweep: already expired for humans.
        # Oldest first, one state at a time.
        _bounded(
            f"{live} AND state = 'active' AND due_at_ms <= c.n AND expires_at_ms <= c.n",
            "due_at_ms",
        ),
        _bounded(
            f"{live} AND state = 'jeopardy' AND due_at_ms <= c.n AND expires_at_ms <= c.n",
            "due_at_ms",
        ),
        # Over the partial unique index of pending requests (one per work item).
        _bounded(f"FROM {takeovers} WHERE status = 'pending'") if takeovers else "NULL",
        _blocked_count(t),
    ]
    return f"WITH c AS (SELECT {now} AS n) SELECT c.n, {', '.join(counts)} FROM c"


def _blocked_count(leases: str) -> str:
    """Blocked work: distinct items over effect_unreconciled_idx with no live lease."""
    return _bounded(
        f"FROM (SELECT DISTINCT e.work_item_id FROM {Effect._meta.db_table} e "
        "WHERE e.decision = 'authorized' AND e.resolution = '' "
        "AND e.outcome IN ('', 'unknown') AND NOT EXISTS (SELECT 1 FROM "
        f"{leases} l WHERE l.work_item_id = e.work_item_id AND l.state IN ('active', 'jeopardy') "
        "AND l.expires_at_ms > c.n)) AS u"
    )


def _counters_of(row: tuple[Any, ...]) -> tuple[int, Counters]:
    """The statement's row as (the clock, the counters), each capped at COUNTER_CAP+1."""
    n, active, overdue, jeopardy, expired, unswept_active, unswept_jeopardy, pending, blocked = row
    return int(n), Counters(
        active=int(active),
        jeopardy=min(int(overdue) + int(jeopardy), COUNTER_CAP + 1),
        expired_last_hour=min(
            int(expired) + int(unswept_active) + int(unswept_jeopardy), COUNTER_CAP + 1
        ),
        pending_takeovers=None if pending is None else int(pending),
        needs_reconciliation=int(blocked),
        unswept=int(unswept_active) + int(unswept_jeopardy),
    )
