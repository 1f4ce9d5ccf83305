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
# The sweep's backlog (active leases past their jeopardy time) is split into "in jeopardy"
# and "expired" by reading at most this many of its entries from each end: exact while the
# backlog is smaller, lower bounds (shown "N+") while a storm keeps the sweep behind. An
# exact split of a backlog of 47,000 read all of it in each of two walks: 45,000 buffers,
# most of the live page's counters during an expiry storm (docs/benchmarks.md).
BACKLOG_WALK = 1_001


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
    # Active by their row, past their jeopardy time: what the sweep has not yet marked or
    # ended, read up to BACKLOG_WALK entries (exact below it).
    behind: int = 0
    # Live in the jeopardy rank of the urgency sort (leases a sweep marked, and `behind`),
    # each part exact up to its cap: whether that rank is empty or fills a page.
    urgent: int = 0
    # Whether `jeopardy` and `expired_last_hour` are exact (up to the cap): the backlog was
    # read whole. While a storm keeps the sweep behind, they are lower bounds.
    split_exact: bool = True
    cap: int = COUNTER_CAP

    @property
    def active_shown(self) -> str:
        return _shown(self.active, self.cap, True)

    @property
    def blocked_shown(self) -> str:
        return _shown(self.needs_reconciliation, self.cap, True)

    @property
    def jeopardy_shown(self) -> str:
        return _shown(self.jeopardy, self.cap, self.split_exact)

    @property
    def expired_shown(self) -> str:
        return _shown(self.expired_last_hour, self.cap, self.split_exact)

    @property
    def behind_shown(self) -> str:
        return _shown(self.behind, self.cap, True)


def _shown(n: int, cap: int, exact: bool) -> str:
    """A count as the page shows it: "1000+" past its cap, "N+" when it is a lower bound."""
    if n > cap:
        return f"{cap}+"
    return str(n) if exact else f"{n}+"


def _walk(sql_from_where: str, order_by: str) -> str:
    """The expiries of the first BACKLOG_WALK rows of `sql_from_where` in `order_by`
    order: a walk of at most BACKLOG_WALK index entries, whatever lies beyond."""
    return f"SELECT expires_at_ms {sql_from_where} ORDER BY {order_by} LIMIT {BACKLOG_WALK}"


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
    # The sweep's backlog: active by its row, past its jeopardy time by the clock. Its
    # newest entries (`d`), read once for two counts (PostgreSQL materializes a CTE that
    # is named twice); the clock as a scalar subquery, so the walk stays an ordered index
    # scan that stops at its LIMIT (a join with `c` would sort the whole backlog).
    backlog = f"{live} AND state = 'active' AND due_at_ms <= (SELECT n FROM c)"
    counts = [
        # Active, jeopardy not reached. Newest first: a renew moves a lease's entry up and
        # leaves the old one dead above the clock until a vacuum, so the entries just
        # above the clock are mostly dead versions (162,204 heap fetches for 1,001 rows
        # in an expiry storm's count from the clock up; docs/benchmarks.md).
        _bounded(f"{live} AND state = 'active' AND due_at_ms > c.n", "due_at_ms DESC"),
        # The backlog's size, up to BACKLOG_WALK.
        "(SELECT count(*) FROM d)",
        # Of the backlog, in jeopardy by time but not expired: newest first (further down
        # lie the leases already expired that no sweep has ended yet).
        "(SELECT count(*) FROM d WHERE expires_at_ms > c.n)",
        # In jeopardy (marked by a sweep), not expired.
        _bounded(f"{live} AND state = 'jeopardy' AND due_at_ms > c.n", "due_at_ms"),
        # Over lease_expired_ended_idx (partial: expired): the last hour's expiries,
        # newest first, an ordered walk that stops at the cap, whatever the statistics say
        # (taken before a storm, they had it read every expired lease over the holder index).
        _bounded(
            f"FROM {t} WHERE state = 'expired' AND ended_at_ms >= c.n - {HOUR_MS}",
            "ended_at_ms DESC",
        ),
        # Of the backlog, expired by time, not yet materialized by a sweep: already expired
        # for humans. Oldest first.
        f"(SELECT count(*) FROM ({_walk(backlog, 'due_at_ms')}) AS w WHERE expires_at_ms <= c.n)",
        # Marked in jeopardy, expired by time, not yet ended.
        _bounded(
            f"{live} AND state = 'jeopardy' AND due_at_ms <= c.n AND expires_at_ms <= c.n",
            "due_at_ms",
        ),
        # Over the partial unique index of pending requests (one per work item).
        _bounded(f"FROM {takeovers} WHERE status = 'pending'") if takeovers else "NULL",
        _blocked_count(t),
    ]
    newest = _walk(backlog, "due_at_ms DESC")
    return f"WITH c AS (SELECT {now} AS n), d AS ({newest}) SELECT c.n, {', '.join(counts)} FROM c"


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
    *counts, pending, blocked = row
    n, active, behind, overdue, jeopardy, expired, unswept_active, unswept_jeopardy = (
        int(v) for v in counts
    )
    over = COUNTER_CAP + 1
    return n, Counters(
        active=active,
        jeopardy=min(overdue + jeopardy, over),
        expired_last_hour=min(expired + unswept_active + unswept_jeopardy, over),
        pending_takeovers=None if pending is None else int(pending),
        needs_reconciliation=int(blocked),
        unswept=unswept_active + unswept_jeopardy,
        behind=behind,
        urgent=min(behind + jeopardy + unswept_jeopardy, over),
        split_exact=behind < BACKLOG_WALK,
    )
