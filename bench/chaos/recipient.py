"""The chaos test's recipients: a tiny WSGI app that logs every attempted effect.

POST /effect with X-Fencing-Token / X-Lease-Epoch / X-Work-Key and a JSON body
{"attempt": …, "idem": …, "agent": …, "kind": …}. In ONE transaction of the recipient's
own database it runs the guard's `check_in` (via `TokenVerifier.check_in`) and inserts a
ledger row, accepted or refused. Because every guarded attempt locks the work item's mark
row before the ledger insert takes its id, the ledger ids of one work item are in commit
order. Configuration (environment): CHAOS_RECIPIENT_DB (conninfo), CHAOS_JWKS_URL, and
CHAOS_RECIPIENT_ROLE: `main` (every agent's effects), or `late` / `late_notified` (the
recipients that never hear from a successor: only paused and stalled holders' late sends
reach them, each on tables of its own). With CHAOS_NOTICE_SECRET_FILE (`late_notified`),
POST /epochs takes Leaseboard's epoch-advance notices
(`leaseboard_recipient.EpochNoticeReceiver`) and raises this recipient's marks.
Both verify with the default configuration: effect tokens only, expired ones refused.

Run under gunicorn: `gunicorn bench.chaos.recipient:application`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from http import HTTPStatus
from typing import Any

from leaseboard_recipient import (
    EpochNoticeReceiver,
    PostgresEpochGuard,
    TokenVerifier,
    decide_from_headers,
)
from leaseboard_recipient.guard import schema_sql
from leaseboard_recipient.verifier import problem_for

LEDGER = "chaos_ledger"
MARKS = "chaos_epoch_marks"
# The late recipients: one never hears of a new epoch, one is told by epoch notices.
LATE_ROLES = ("late", "late_notified")
TABLES = {
    "main": (LEDGER, MARKS),
    **{role: (f"chaos_{role}_ledger", f"chaos_{role}_epoch_marks") for role in LATE_ROLES},
}


def schema(ledger: str, marks: str) -> list[str]:
    return [
        # The guard's own table (work key, the mark's generation and epoch), as it ships.
        *schema_sql(marks).split("; "),
        f"CREATE TABLE IF NOT EXISTS {ledger} ("
        "id bigserial PRIMARY KEY, attempt text NOT NULL UNIQUE, idem text NOT NULL, "
        "agent text NOT NULL, kind text NOT NULL, work_key text, epoch bigint, "
        "high_water bigint, status text NOT NULL CHECK (status IN ('accepted', 'refused')), "
        "code text, effect_id text, generation bigint, lease_id text, "
        "txid xid8 NOT NULL DEFAULT pg_current_xact_id(), "
        "at timestamptz NOT NULL DEFAULT clock_timestamp())",
        f"CREATE INDEX IF NOT EXISTS {ledger}_work ON {ledger} (work_key, id)",
    ]


SCHEMA = [stmt for ledger, marks in TABLES.values() for stmt in schema(ledger, marks)]

_local = threading.local()
_verifier: TokenVerifier | None = None
_receiver: EpochNoticeReceiver | None = None
_lock = threading.Lock()


def _tables() -> tuple[str, str]:
    return TABLES[os.environ.get("CHAOS_RECIPIENT_ROLE", "main")]


def verifier() -> TokenVerifier:
    global _verifier
    with _lock:
        if _verifier is None:
            _verifier = TokenVerifier(
                recipient=f"chaos-{os.environ.get('CHAOS_RECIPIENT_ROLE', 'main')}",
                jwks_url=os.environ["CHAOS_JWKS_URL"],
                guard=PostgresEpochGuard(os.environ["CHAOS_RECIPIENT_DB"], table=_tables()[1]),
                min_refresh_interval_s=1.0,
            )
        return _verifier


def receiver() -> EpochNoticeReceiver | None:
    """The epoch-notice receiver, once the orchestrator has written the webhook secret."""
    global _receiver
    path = os.environ.get("CHAOS_NOTICE_SECRET_FILE", "")
    with _lock:
        if _receiver is None and path and os.path.exists(path):
            with open(path) as handle:
                secret = handle.read().strip()
            guard = PostgresEpochGuard(os.environ["CHAOS_RECIPIENT_DB"], table=_tables()[1])
            _receiver = EpochNoticeReceiver(secret=secret, guard=guard)
        return _receiver


def _conn() -> Any:
    import psycopg

    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["CHAOS_RECIPIENT_DB"], autocommit=True, connect_timeout=3)
        _local.conn = conn
    return conn


def _drop_conn() -> None:
    conn = getattr(_local, "conn", None)
    _local.conn = None
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


def _json(start_response: Any, status: int, body: dict) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
    )
    return [payload]


def application(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    import psycopg

    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if path == "/healthz":
        return _json(start_response, 200, {"ok": True})
    if path == "/epochs":
        notices = receiver()
        if notices is None:
            return _json(start_response, 404, {"code": "not_found"})
        try:
            return list(notices.wsgi(environ, start_response))
        except psycopg.Error:
            _drop_conn()
            return _json(start_response, 503, {"code": "unavailable"})
    if path != "/effect" or method != "POST":
        return _json(start_response, 404, {"code": "not_found"})
    try:
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(size) or b"{}")
        attempt, idem = str(body["attempt"]), str(body.get("idem", ""))
        agent, kind = str(body.get("agent", "")), str(body.get("kind", ""))
    except (ValueError, KeyError, TypeError):
        return _json(start_response, 400, {"code": "validation_error"})

    def header(name: str) -> str | None:
        return environ.get("HTTP_" + name.upper().replace("-", "_"))

    try:
        conn = _conn()
        with conn.transaction(), conn.cursor() as cur:
            decision = decide_from_headers(verifier(), header, cursor=cur)
            cur.execute(
                f"INSERT INTO {_tables()[0]} (attempt, idem, agent, kind, work_key, epoch, "
                "high_water, status, code, effect_id, generation, lease_id) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " RETURNING id",
                (
                    attempt,
                    idem,
                    agent,
                    kind,
                    decision.work_key,
                    decision.epoch,
                    decision.high_water,
                    "accepted" if decision.accepted else "refused",
                    decision.code,
                    (decision.claims.effect_id if decision.claims else None),
                    # The fencing order's generation (docs/design.md §5): 0 for tokens
                    # that carry none; the HA run (bench/ha/chaos_figures.py) orders by it.
                    (getattr(decision.claims, "generation", 0) if decision.claims else None),
                    (decision.claims.lease_id if decision.claims else None),
                ),
            )
            ledger_id = cur.fetchone()[0]
    except psycopg.Error as exc:
        _drop_conn()  # the database restarted or the write failed: nothing was recorded
        return _json(start_response, 503, {"code": "unavailable", "detail": str(exc)[:200]})
    if decision.accepted:
        return _json(
            start_response,
            201,
            {"ledger_id": ledger_id, "epoch": decision.epoch, "high_water": decision.high_water},
        )
    status, problem = problem_for(decision)
    problem["ledger_id"] = ledger_id
    return _json(start_response, status, problem)
