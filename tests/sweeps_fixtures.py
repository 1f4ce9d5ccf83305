"""Helpers for the sweep tests and bench: bulk lease generation and aging stored times."""

from __future__ import annotations

from django.db import connection

from leaseboard.core.clock import now_ms_sql
from leaseboard.core.models import Executor, Queue

LEASE_TIME_COLUMNS = (
    "granted_at_ms",
    "renewed_at_ms",
    "jeopardy_at_ms",
    "expires_at_ms",
    "due_at_ms",
    "max_expires_at_ms",
)


def bulk_leases(
    n: int,
    *,
    prefix: str,
    holder: Executor,
    jeopardy_in_ms: int,
    expires_in_ms: int,
    ttl_ms: int = 15_000,
) -> None:
    """Insert n admitted work items, each with an active lease (epoch 1), in two statements.
    Times are relative to the database clock; negative means already past."""
    queue, _ = Queue.objects.get_or_create(name="default")
    now = now_ms_sql()
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO core_workitem (key, queue_id, title, scope, timing, admission, status, "
            f"epoch, created_at_ms, admitted_at_ms) "
            f"SELECT %s || g, %s, '', '{{}}', '{{}}', 'admitted', 'open', 1, c.n, c.n "
            f"FROM generate_series(1, %s) g, (SELECT {now} AS n) c",
            [prefix, queue.id, n],
        )
        cur.execute(
            f"INSERT INTO core_lease (id, work_item_id, holder_id, epoch, state, grant_kind, "
            f"granted_at_ms, renewed_at_ms, jeopardy_at_ms, expires_at_ms, max_expires_at_ms, "
            f"due_at_ms, ttl_ms, renew_after_ms, jeopardy_after_ms, lock_delay_ms, end_reason, "
            f"takeover_reason, renew_count, max_gap_ms, recent_renewals) "
            f"SELECT gen_random_uuid(), w.id, %s, 1, 'active', 'acquire', c.n - 1000, "
            f"c.n - 1000, c.n + %s, c.n + %s, c.n + 86400000, c.n + %s, %s, %s, %s, 0, '', '', "
            f"1, 0, '' FROM core_workitem w, (SELECT {now} AS n) c WHERE w.key LIKE %s",
            [
                holder.id,
                jeopardy_in_ms,
                expires_in_ms,
                jeopardy_in_ms,
                ttl_ms,
                ttl_ms // 3,
                (ttl_ms * 2) // 3,
                prefix.replace("%", r"\%") + "%",
            ],
        )


def age_leases(ms: int, *, lease_ids: list | None = None) -> None:
    """Move live leases' stored times `ms` into the past: time passes for them only."""
    sets = ", ".join(f"{col} = {col} - %s" for col in LEASE_TIME_COLUMNS)
    params: list = [ms] * len(LEASE_TIME_COLUMNS)
    where = "state IN ('active', 'jeopardy')"
    if lease_ids is not None:
        where += " AND id = ANY(%s::uuid[])"
        params.append([str(x) for x in lease_ids])
    with connection.cursor() as cur:
        cur.execute(f"UPDATE core_lease SET {sets} WHERE {where}", params)


def age_sweep_clock(ms: int) -> None:
    """Pretend the last sweep ran `ms` earlier (sweeps were away)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE sweeps_sweepstate SET last_sweep_at_ms = last_sweep_at_ms - %s", [ms])
