"""The bare grant's tables: a work item (key, epoch) and an append-only event row shaped
like core_leaseevent, with the same indexes; seeded with the same keys as the API's items.
Kept apart from the project's tables so bare grants never move a real item's epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

SCHEMA = [
    "DROP TABLE IF EXISTS bench_bare_event, bench_bare_item",
    "CREATE TABLE bench_bare_item (id bigserial PRIMARY KEY, key varchar(200) NOT NULL UNIQUE, "
    "epoch bigint NOT NULL DEFAULT 0)",
    "CREATE TABLE bench_bare_event (id bigserial PRIMARY KEY, "
    "item_id bigint NOT NULL REFERENCES bench_bare_item (id), epoch bigint NOT NULL, "
    "kind varchar(12) NOT NULL, at_ms bigint NOT NULL, detail jsonb NOT NULL)",
    "CREATE INDEX bench_bare_event_item ON bench_bare_event (item_id, at_ms)",
    "CREATE INDEX bench_bare_event_at ON bench_bare_event (at_ms)",
]


def create_and_seed(conn: psycopg.Connection, n_items: int) -> None:
    """`conn`: an autocommit psycopg connection to the bench database."""
    for stmt in SCHEMA:
        conn.execute(stmt)
    conn.execute(
        "INSERT INTO bench_bare_item (key) SELECT 'bench-' || g FROM generate_series(0, %s) g",
        [n_items - 1],
    )
    conn.execute("ANALYZE bench_bare_item")
