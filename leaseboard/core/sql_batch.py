"""Statements over a batch of leases the caller has locked and read: the sweep's
compare-and-set check, its jeopardy mark, and the one expiry write (a sweep's batch, or
one lease expired lazily). Both dialects side by side, as in leaseboard.core.sql, whose
row-source helpers they use; tests/core/test_sql.py runs each on both databases.
"""

from __future__ import annotations

from typing import Any

from leaseboard.core.models.leases import Lease
from leaseboard.core.sql import (
    POSTGRESQL,
    SQLITE,
    literal,
    rows_params,
    rows_source,
    unsupported_vendor,
)
from leaseboard.domain.certainty import Certainty


def lease_version(lease: Any) -> list[Any]:
    """What a compare-and-set here matches of a lease after its id, in column order: work
    item id, state, epoch, renewed_at_ms, expires_at_ms, due_at_ms (a Lease or a row)."""
    return [
        lease.work_item_id,
        lease.state,
        lease.epoch,
        lease.renewed_at_ms,
        lease.expires_at_ms,
        lease.due_at_ms,
    ]


def lease_versions_unchanged(vendor: str, n_rows: int) -> str:
    """The ids of leases whose stored version still equals the one given: the sweep's
    compare-and-set check between its claim and its write, keyed by the work items as well
    (each lease on its work item's shard).

    Parameters: `keyed_params` of rows (lease id, work item id, state, epoch,
    renewed_at_ms, expires_at_ms, due_at_ms)."""
    names = ["id", "work_item", "state", "epoch", "renewed", "expires", "due"]
    types = ["uuid", "bigint", "text", "bigint", "bigint", "bigint", "bigint"]
    versions = rows_source(vendor, types, n_rows, names)
    stored = (
        "l.id",
        "l.work_item_id",
        "l.state",
        "l.epoch",
        "l.renewed_at_ms",
        "l.expires_at_ms",
        "l.due_at_ms",
    )
    match = " AND ".join(f"{a} = v.{b}" for a, b in zip(stored, names, strict=True))
    keyed = " WHERE l.work_item_id = ANY(%s::bigint[])" if vendor == POSTGRESQL else ""
    return f"SELECT l.id FROM {Lease._meta.db_table} l JOIN {versions} ON {match}{keyed}"


# The columns of `lease_jeopardy_mark`'s row source, and their PostgreSQL types.
# A row's `burst`: the open burst incident of its queue and kind its new alert is born
# folded into, resolved at once as a member (leaseboard.core.services.alert_bursts,
# `burst_joins_plan`), or NULL: the alert opens unresolved and is folded after the write.
_JOINED_AT = "CASE WHEN burst IS NULL THEN NULL ELSE swept_at END"
_JOINED_AT_V = "CASE WHEN v.burst IS NULL THEN NULL ELSE v.swept_at END"

JEOPARDY_MARK_COLUMNS = (
    ("id", "uuid"),
    ("state", "text"),
    ("epoch", "bigint"),
    ("renewed", "bigint"),
    ("expires", "bigint"),
    ("due", "bigint"),
    ("dedupe", "text"),
    ("message", "text"),
    ("holder", "text"),
    ("holder_kind", "text"),
    ("swept_at", "bigint"),
    ("burst", "bigint"),
)


def lease_jeopardy_mark(vendor: str, n_rows: int) -> list[str]:
    """One piece: SQL text, both dialects side by side.

    A sweep batch's jeopardy transition for leases it has locked: each lease still at
    the version the claim read (compare-and-set, as `lease_versions_unchanged`) moves to
    JEOPARDY with its next due time at its expiry, gets its JEOPARDY event (dated when
    jeopardy began) and its jeopardy alert (unique per lease and epoch through the dedupe
    key; one that exists already is not opened again). PostgreSQL: one statement; SQLite:
    three, in its IMMEDIATE transaction, the writes before the state change that decides
    them.

    Parameters of each statement: `rows_params` of rows in JEOPARDY_MARK_COLUMNS order
    (the dedupe key and the message are the alert's, built by the caller; `burst`, or
    NULL, the burst incident the alert is born folded into). Each row a statement returns
    is ('lease', NULL, NULL, NULL) for a lease marked or ('alert', its id, its due time,
    the incident it was born folded into or NULL) for an alert opened."""
    from leaseboard.core.models.alerts import Alert
    from leaseboard.core.models.leases import LeaseEvent

    names = [name for name, _ in JEOPARDY_MARK_COLUMNS]
    types = [kind for _, kind in JEOPARDY_MARK_COLUMNS]
    source = rows_source(vendor, types, n_rows, names)
    table, events, alerts = Lease._meta.db_table, LeaseEvent._meta.db_table, Alert._meta.db_table
    jeopardy = literal(Certainty.JEOPARDY)
    match = (
        "l.id = v.id AND l.state = v.state AND l.epoch = v.epoch "
        "AND l.renewed_at_ms = v.renewed AND l.expires_at_ms = v.expires AND l.due_at_ms = v.due"
    )
    event_cols = "lease_id, work_item_id, epoch, kind, at_ms, detail, actor_id"
    alert_cols = (
        "kind, dedupe_key, lease_id, work_item_id, epoch, message, detail, due_at_ms, "
        "opened_at_ms, acknowledge_note, occurrences, folded_into_id, resolved_at_ms"
    )
    if vendor == POSTGRESQL:
        return [
            f"WITH j AS (UPDATE {table} l SET state = {jeopardy}, due_at_ms = l.expires_at_ms "
            f"FROM {source} WHERE {match} RETURNING l.id, l.work_item_id, l.epoch, "
            "l.jeopardy_at_ms, l.expires_at_ms, v.dedupe, v.message, v.holder, v.holder_kind, "
            "v.swept_at, v.burst), "
            f"e AS (INSERT INTO {events} ({event_cols}) SELECT id, work_item_id, epoch, "
            f"{jeopardy}, LEAST(swept_at, jeopardy_at_ms), jsonb_build_object("
            "'materialized_at_ms', swept_at, 'expires_at_ms', expires_at_ms), NULL FROM j), "
            f"a AS (INSERT INTO {alerts} ({alert_cols}) SELECT {jeopardy}, dedupe, id, "
            "work_item_id, epoch, message, jsonb_build_object('holder', holder, 'holder_kind', "
            "holder_kind, 'expires_at_ms', expires_at_ms), jeopardy_at_ms, swept_at, '', 1, "
            f"burst, {_JOINED_AT} FROM j ON CONFLICT (dedupe_key) DO NOTHING "
            "RETURNING id, due_at_ms, folded_into_id) "
            "SELECT 'lease', NULL::bigint, NULL::bigint, NULL::bigint FROM j "
            "UNION ALL SELECT 'alert', id, due_at_ms, folded_into_id FROM a"
        ]
    if vendor == SQLITE:
        locked = f"{table} l JOIN {source} ON {match}"
        return [
            f"INSERT INTO {events} ({event_cols}) SELECT l.id, l.work_item_id, l.epoch, "
            f"{jeopardy}, MIN(v.swept_at, l.jeopardy_at_ms), json_object("
            "'materialized_at_ms', v.swept_at, 'expires_at_ms', l.expires_at_ms), NULL "
            f"FROM {locked}",
            f"INSERT INTO {alerts} ({alert_cols}) SELECT {jeopardy}, v.dedupe, l.id, "
            "l.work_item_id, l.epoch, v.message, json_object('holder', v.holder, "
            "'holder_kind', v.holder_kind, 'expires_at_ms', l.expires_at_ms), "
            f"l.jeopardy_at_ms, v.swept_at, '', 1, v.burst, {_JOINED_AT_V} FROM {locked} "
            "WHERE true ON CONFLICT (dedupe_key) DO NOTHING "
            "RETURNING 'alert', id, due_at_ms, folded_into_id",
            f"UPDATE {table} SET state = {jeopardy}, due_at_ms = expires_at_ms "
            f"WHERE id IN (SELECT l.id FROM {locked}) RETURNING 'lease', NULL, NULL, NULL",
        ]
    raise unsupported_vendor(vendor)


# The columns of `lease_expire_mark`'s row source, and their PostgreSQL types.
EXPIRE_MARK_COLUMNS = (
    ("id", "uuid"),
    ("work_item", "bigint"),
    ("state", "text"),
    ("epoch", "bigint"),
    ("renewed", "bigint"),
    ("expires", "bigint"),
    ("due", "bigint"),
    ("alert_kind", "text"),
    ("dedupe", "text"),
    ("jeopardy", "text"),
    ("message", "text"),
    ("detail", "text"),
    ("swept_at", "bigint"),
    ("burst", "bigint"),
)
EXPIRE_REASON = "ttl elapsed"


def lease_expire_mark(vendor: str, n_rows: int) -> list[str]:
    """One piece: SQL text, both dialects side by side.

    The one expiry write, for a batch of live leases the caller has locked: each lease
    still at the version the caller read (compare-and-set, as `lease_versions_unchanged`)
    moves to EXPIRED, ended when its validity ended (`LEAST(now, expires_at_ms)`), gets its
    EXPIRED event (dated then), its open jeopardy alert resolved (found by its dedupe key,
    the unique index: the planner's other choice, the open-alerts index, holds every alert a
    storm resolved until a vacuum, 55 ms a batch measured), and its expiry alert
    (unique per lease and epoch through the dedupe key; one that exists already is not
    opened again). Keyed by the work items as well as the lease ids (the shard each lease
    lives on, tests/architecture/test_sharding.py). PostgreSQL: one statement; SQLite:
    four, in its IMMEDIATE transaction, the state change last (the others match on the
    state before it).

    Parameters of each statement: `keyed_params` of rows in EXPIRE_MARK_COLUMNS order; a
    row's `burst` (or NULL) is the burst incident its alert is born folded into.
    Returns rows ('lease', lease id, work item id, ended_at_ms, NULL, NULL) for each lease
    expired and ('alert', alert id, NULL, due_at_ms, kind, folded_into_id) for each alert
    opened."""
    from leaseboard.core.models.alerts import Alert
    from leaseboard.core.models.leases import LeaseEvent

    names = [name for name, _ in EXPIRE_MARK_COLUMNS]
    types = [kind for _, kind in EXPIRE_MARK_COLUMNS]
    source = rows_source(vendor, types, n_rows, names)
    table, events, alerts = Lease._meta.db_table, LeaseEvent._meta.db_table, Alert._meta.db_table
    expired = literal(Lease.State.EXPIRED)
    match = (
        "l.id = v.id AND l.work_item_id = v.work_item AND l.state = v.state "
        "AND l.epoch = v.epoch AND l.renewed_at_ms = v.renewed AND l.expires_at_ms = v.expires "
        "AND l.due_at_ms = v.due"
    )
    event_cols = "lease_id, work_item_id, epoch, kind, at_ms, detail, actor_id"
    alert_cols = (
        "kind, dedupe_key, lease_id, work_item_id, epoch, message, detail, due_at_ms, "
        "opened_at_ms, acknowledge_note, occurrences, folded_into_id, resolved_at_ms"
    )
    reason = f"'{EXPIRE_REASON}'"
    if vendor == POSTGRESQL:
        return [
            f"WITH x AS (UPDATE {table} l SET state = {expired}, "
            f"ended_at_ms = LEAST(v.swept_at, l.expires_at_ms), end_reason = {reason}, "
            f"ended_by_id = NULL FROM {source} WHERE {match} "
            "AND l.work_item_id = ANY(%s::bigint[]) "
            "RETURNING l.id, l.work_item_id, l.epoch, l.expires_at_ms, l.ended_at_ms, "
            "v.alert_kind, v.dedupe, v.jeopardy, v.message, v.detail, v.swept_at, v.burst), "
            f"e AS (INSERT INTO {events} ({event_cols}) SELECT id, work_item_id, epoch, "
            f"{expired}, ended_at_ms, jsonb_build_object('reason', {reason}, "
            "'materialized_at_ms', swept_at), NULL FROM x), "
            f"r AS (UPDATE {alerts} a SET resolved_at_ms = x.swept_at FROM x "
            "WHERE a.dedupe_key = x.jeopardy AND a.resolved_at_ms IS NULL), "
            f"a AS (INSERT INTO {alerts} ({alert_cols}) SELECT alert_kind, dedupe, id, "
            "work_item_id, epoch, message, detail::jsonb, expires_at_ms, swept_at, '', 1, "
            f"burst, {_JOINED_AT} FROM x ON CONFLICT (dedupe_key) DO NOTHING "
            "RETURNING id, due_at_ms, kind, folded_into_id) "
            "SELECT 'lease', id::text, work_item_id, ended_at_ms, NULL::text, NULL::bigint "
            "FROM x UNION ALL SELECT 'alert', id::text, NULL::bigint, due_at_ms, kind, "
            "folded_into_id FROM a"
        ]
    if vendor == SQLITE:
        locked = f"{table} l JOIN {source} ON {match}"
        return [
            f"INSERT INTO {events} ({event_cols}) SELECT l.id, l.work_item_id, l.epoch, "
            f"{expired}, MIN(v.swept_at, l.expires_at_ms), json_object('reason', {reason}, "
            f"'materialized_at_ms', v.swept_at), NULL FROM {locked}",
            f"INSERT INTO {alerts} ({alert_cols}) SELECT v.alert_kind, v.dedupe, l.id, "
            "l.work_item_id, l.epoch, v.message, v.detail, l.expires_at_ms, v.swept_at, '', 1, "
            f"v.burst, {_JOINED_AT_V} FROM {locked} WHERE true "
            "ON CONFLICT (dedupe_key) DO NOTHING "
            "RETURNING 'alert', id, NULL, due_at_ms, kind, folded_into_id",
            f"UPDATE {alerts} AS a SET resolved_at_ms = v.swept_at FROM {locked} "
            "WHERE a.dedupe_key = v.jeopardy AND a.resolved_at_ms IS NULL",
            f"UPDATE {table} AS l SET state = {expired}, "
            f"ended_at_ms = MIN(v.swept_at, l.expires_at_ms), end_reason = {reason}, "
            f"ended_by_id = NULL FROM {source} WHERE {match} "
            "RETURNING 'lease', id, work_item_id, ended_at_ms, NULL, NULL",
        ]
    raise unsupported_vendor(vendor)


def keyed_params(vendor: str, rows: list[list[Any]], work_item_ids: list[int]) -> list[Any]:
    """The parameters of a statement here keyed by work item (`lease_versions_unchanged`,
    `lease_expire_mark`): `rows_params` of the rows, then on PostgreSQL the array of the
    rows' work item ids (what a Citus deployment routes on)."""
    params = rows_params(vendor, rows)
    return [*params, sorted(set(work_item_ids))] if vendor == POSTGRESQL else params
