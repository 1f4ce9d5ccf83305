"""The two hot paths with nothing but Django around them: a view, a cursor, raw SQL.

`renew`: one fenced single-row compare-and-set on the project's real lease table — the same
SET list as the API's fast path (`core.sql.lease_renew`), written out here because this
project installs no Leaseboard code; the holder comes from the query string, not a token.
`grant`: one transaction that locks a work item row, raises its epoch and inserts an event
row (bench tables of the same shape, seeded like the API's items: bench/bare/tables.py).
"""

from __future__ import annotations

import json

from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse

NOW_MS = "(floor(extract(epoch from clock_timestamp()) * 1000))::bigint"

RENEW_SQL = (
    "UPDATE core_lease AS l SET renewed_at_ms = c.n, "
    "expires_at_ms = LEAST(c.n + l.ttl_ms, l.max_expires_at_ms), "
    "jeopardy_at_ms = LEAST(c.n + l.jeopardy_after_ms, l.max_expires_at_ms), "
    "due_at_ms = LEAST(c.n + l.jeopardy_after_ms, l.max_expires_at_ms), "
    "renew_count = l.renew_count + 1, "
    "max_gap_ms = GREATEST(l.max_gap_ms, c.n - l.renewed_at_ms), "
    "recent_renewals = right(l.recent_renewals || lpad(c.n::text, 13, '0') || ',', 280) "
    f"FROM (SELECT {NOW_MS} AS n) AS c "
    "WHERE l.id = %s AND l.epoch = %s AND l.holder_id = %s "
    "AND l.state = 'active' AND l.expires_at_ms > c.n "
    "RETURNING l.id, l.epoch, l.expires_at_ms - c.n"
)


def renew_answer(sql: str, request: HttpRequest, lease_id: object) -> JsonResponse:
    """Run a renew statement taking (lease id, epoch, holder) and answer like the API; also
    the body of the raw view inside the project's stack (bench/raw_view.py)."""
    epoch = int(json.loads(request.body)["epoch"])
    with connection.cursor() as cursor:
        cursor.execute(sql, [str(lease_id), epoch, int(request.GET["h"])])
        row = cursor.fetchone()
    if row is None:
        return JsonResponse({"code": "refused"}, status=409)
    return JsonResponse({"lease_id": str(row[0]), "epoch": row[1], "expires_in_ms": row[2]})


def renew(request: HttpRequest, lease_id: object) -> JsonResponse:
    return renew_answer(RENEW_SQL, request, lease_id)


def grant(request: HttpRequest, key: str) -> JsonResponse:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM bench_bare_item WHERE key = %s FOR NO KEY UPDATE", [key])
        row = cursor.fetchone()
        if row is None:
            return JsonResponse({"code": "not_found"}, status=404)
        cursor.execute(
            "UPDATE bench_bare_item SET epoch = epoch + 1 WHERE id = %s RETURNING epoch", [row[0]]
        )
        epoch = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO bench_bare_event (item_id, epoch, kind, at_ms, detail) "
            f"VALUES (%s, %s, 'granted', {NOW_MS}, '{{}}')",
            [row[0], epoch],
        )
    return JsonResponse({"key": key, "epoch": epoch}, status=201)
