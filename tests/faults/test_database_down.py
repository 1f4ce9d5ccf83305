"""PostgreSQL stopped, and frozen, under a real gunicorn (a PostgreSQL of the module's own):
every API path answers 503 `unavailable` problem+json with Retry-After, a dashboard POST
answers the styled 503 page, nothing is changed, and a frozen server is answered within
the request's bound instead of hanging (docs/design.md §14)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import psycopg
import pytest

from tests.faults.stack import BOUNDS, Stack, problem

# django_db: pytest-django then migrates the test database, whose schema the stack copies.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db]

DEADLINE_S = int(BOUNDS["LEASEBOARD_API_DEADLINE_MS"]) / 1000
CONNECT_S = int(BOUNDS["LEASEBOARD_DB_CONNECT_TIMEOUT_S"])
LOCK_S = int(BOUNDS["LEASEBOARD_DB_LOCK_TIMEOUT_MS"]) / 1000


def _lease(api: httpx.Client, key: str) -> dict[str, Any]:
    assert api.post("/api/v1/work-items", json={"key": key}).status_code in (200, 201)
    grant = api.post(f"/api/v1/work-items/{key}/lease", json={})
    assert grant.status_code == 201, grant.text
    return grant.json()


def _calls(lease: dict[str, Any], key: str) -> dict[str, tuple[str, dict[str, Any]]]:
    lid, epoch = lease["lease_id"], lease["epoch"]
    return {
        "acquire": (f"/api/v1/work-items/{key}-other/lease", {}),
        "renew": (f"/api/v1/leases/{lid}/renew", {"epoch": epoch}),
        "batch renew": ("/api/v1/leases/renew", {"leases": [{"lease_id": lid, "epoch": epoch}]}),
        "effect": (
            "/api/v1/effects",
            {
                "lease_id": lid,
                "epoch": epoch,
                "kind": "refund",
                "target": "inv-1",
                "idempotency_key": f"{key}-refund",
            },
        ),
        "release": (f"/api/v1/leases/{lid}/release", {"epoch": epoch}),
    }


def _wait_until_answering(api: httpx.Client, path: str, body: dict[str, Any]) -> None:
    deadline = time.monotonic() + 30
    while api.post(path, json=body).status_code != 200:
        assert time.monotonic() < deadline, "the API never answered again"
        time.sleep(0.2)


def test_postgres_stopped_every_api_path_answers_503_unavailable_and_nothing_changes(
    pg_stack: Stack,
) -> None:
    api = pg_stack.api()
    lease = _lease(api, "stopped-1")
    browser, csrf = pg_stack.signed_in()
    pg_stack.pg.stop()
    try:
        for name, (path, body) in _calls(lease, "stopped-1").items():
            answer = api.post(path, json=body)
            assert answer.status_code == 503, (name, answer.status_code, answer.text[:300])
            body = problem(answer)
            assert body["code"] == "unavailable" and body["status"] == 503, name
            assert int(answer.headers["Retry-After"]) >= 1, name
            assert body["request_id"] and answer.headers["X-Request-Id"] == body["request_id"]
            assert "nothing was changed" in body["detail"], (name, body["detail"])
        # A dashboard POST (put the lease on hold): the styled page, not Django's 500.
        page = browser.post(
            f"/leases/{lease['lease_id']}/hold",
            data={"csrfmiddlewaretoken": csrf, "reason_category": "other", "reason_text": "check"},
            headers={"Referer": f"{pg_stack.web.url}/"},  # type: ignore[union-attr]
        )
        assert page.status_code == 503 and page.headers["Retry-After"]
        assert page.headers["content-type"].startswith("text/html")
        assert "The database is unreachable, nothing was changed." in page.text
        assert "leaseboard.css" in page.text  # the site's style, from a layout needing no DB
    finally:
        pg_stack.pg.start()
    lid, epoch = lease["lease_id"], lease["epoch"]
    _wait_until_answering(api, f"/api/v1/leases/{lid}/renew", {"epoch": epoch})
    # Nothing the refused calls asked for happened: the lease is live, unheld, unreleased,
    # the other work item was never leased, no effect was recorded.
    with psycopg.connect(pg_stack.db_url) as conn:
        state, hold = conn.execute(
            "SELECT state, hold_reason FROM core_lease WHERE id = %s", [lid]
        ).fetchone()
        effects = conn.execute("SELECT count(*) FROM core_effect").fetchone()[0]
        others = conn.execute(
            "SELECT count(*) FROM core_lease l JOIN core_workitem w ON w.id = l.work_item_id "
            "WHERE w.key = 'stopped-1-other'"
        ).fetchone()[0]
    assert (state, hold, effects, others) == ("active", "", 0, 0)


def test_postgres_frozen_requests_are_answered_503_within_their_bound_then_recover(
    pg_stack: Stack,
) -> None:
    api = pg_stack.api()
    lease = _lease(api, "frozen-1")
    path, body = f"/api/v1/leases/{lease['lease_id']}/renew", {"epoch": lease["epoch"]}
    for _ in range(8):  # every gunicorn thread holds a warm connection
        assert api.post(path, json=body).status_code == 200
    pg_stack.pg.freeze()
    timings = []
    try:
        for _ in range(6):
            started = time.monotonic()
            answer = api.post(path, json=body)
            timings.append(time.monotonic() - started)
            assert answer.status_code == 503, answer.text[:300]
            assert problem(answer)["code"] == "unavailable"
            time.sleep(0.3)
    finally:
        pg_stack.pg.thaw()
    # Each answer came within its bound (the request's deadline on a warm connection, the
    # connect timeout on a new one), never after the freeze: generous margins for a
    # loaded machine, far below what an unbounded request waits (the whole freeze).
    assert max(timings) < 3 * max(DEADLINE_S, CONNECT_S), timings
    _wait_until_answering(api, path, body)


def test_a_row_locked_past_the_lock_timeout_answers_503_lock_timeout(pg_stack: Stack) -> None:
    api = pg_stack.api()
    lease = _lease(api, "locked-1")
    with psycopg.connect(pg_stack.db_url) as holder:
        holder.execute("SELECT 1 FROM core_lease WHERE id = %s FOR UPDATE", [lease["lease_id"]])
        started = time.monotonic()
        answer = api.post(
            f"/api/v1/leases/{lease['lease_id']}/release", json={"epoch": lease["epoch"]}
        )
        took = time.monotonic() - started
        holder.rollback()
    assert answer.status_code == 503, answer.text[:300]
    body = problem(answer)
    assert body["code"] == "unavailable" and body["reason"] == "lock_timeout"
    assert LOCK_S * 0.8 < took < 10 * LOCK_S, took
    # ...and the lock gone, the same call succeeds: nothing was half-done.
    again = api.post(f"/api/v1/leases/{lease['lease_id']}/release", json={"epoch": lease["epoch"]})
    assert again.status_code == 200, again.text[:300]
