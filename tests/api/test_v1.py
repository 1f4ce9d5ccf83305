"""The v1 HTTP API through Django's client: the happy path, refusals, and bad input.

Every bad request gets a 4xx problem-details body with a stable code and writes nothing.
"""

from __future__ import annotations

import pytest
from django.db import connection

from leaseboard.core.models import Checkpoint, Effect, Lease, LeaseEvent, WorkItem
from leaseboard.domain.errors import ALL_CODES

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def row_counts() -> dict[str, int]:
    return {
        m.__name__: m.objects.count() for m in (WorkItem, Lease, LeaseEvent, Effect, Checkpoint)
    }


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json_body
    assert body["code"] == code and body["code"] in ALL_CODES
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def test_the_tour_admit_acquire_renew_effect_and_a_stale_epoch(api, agent, holder, db_clock):
    token, grant = holder
    assert grant["epoch"] == 1 and grant["ttl_ms"] == 15_000 and grant["renew_after_ms"] == 5_000
    assert grant["fencing_token"] and grant["checkpoint"] is None
    lease = grant["lease_id"]
    r = api.post(f"/api/v1/leases/{lease}/renew", {"epoch": 1}, token)
    assert r.status_code == 200 and r.json_body["certainty"] == "active"
    r = api.post(f"/api/v1/leases/{lease}/checkpoints", {"epoch": 1, "data": {"step": 2}}, token)
    assert r.status_code == 201 and r.json_body["seq"] == 1
    effect = {
        "lease_id": lease,
        "epoch": 1,
        "kind": "payment.refund",
        "target": "order-1",
        "idempotency_key": "refund-1",
        "payload": {"amount": 12},
    }
    r = api.post("/api/v1/effects", effect, token)
    assert r.status_code == 201 and r.json_body["decision"] == "authorized"
    r2 = api.post("/api/v1/effects", effect, token)
    assert r2.json_body["effect_id"] == r.json_body["effect_id"]
    r = api.post(
        f"/api/v1/effects/{r.json_body['effect_id']}/outcome", {"outcome": "applied"}, token
    )
    assert r.status_code == 200
    # The holder stalls past its ttl; a successor acquires and sees the checkpoint.
    db_clock.advance(15_001)
    _, token2 = agent("successor")
    r = api.post("/api/v1/work-items/order-1/lease", {}, token2)
    assert r.status_code == 201 and r.json_body["epoch"] == 2
    assert r.json_body["checkpoint"]["data"] == {"step": 2}
    body = assert_problem(
        api.post(f"/api/v1/leases/{lease}/renew", {"epoch": 1}, token), 409, "lease_expired"
    )
    assert body["decision"] == "lease"
    body = assert_problem(
        api.post("/api/v1/effects", {**effect, "idempotency_key": "refund-2"}, token),
        409,
        "stale_epoch",
    )
    assert (body["current_epoch"], body["your_epoch"]) == (2, 1)
    r = api.get("/api/v1/work-items/order-1", token2)
    assert r.json_body["holder"] == "successor" and r.json_body["epoch"] == 2


def test_a_contended_acquire_says_who_holds_it(api, agent, holder):
    _, other = agent()
    body = assert_problem(
        api.post("/api/v1/work-items/order-1/lease", {}, other), 409, "work_leased"
    )
    assert body["holder_kind"] == "agent" and body["current_epoch"] == 1


def test_not_holder_is_403(api, agent, holder):
    _, grant = holder
    _, other = agent()
    assert_problem(
        api.post(f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": 1}, other),
        403,
        "not_holder",
    )
    assert_problem(
        api.post(f"/api/v1/leases/{grant['lease_id']}/release", {"epoch": 1}, other),
        403,
        "not_holder",
    )


def test_an_unknown_queue_is_not_found(api, agent):
    _, token = agent()
    assert_problem(
        api.post("/api/v1/work-items", {"key": "x", "queue": "nope"}, token), 404, "not_found"
    )


def test_capacity_rejects_or_queues(api, agent):
    from leaseboard.core.models import Queue

    Queue.objects.create(name="tight", capacity=1, overflow="reject")
    Queue.objects.create(name="waits", capacity=1, overflow="wait")
    _, token = agent()
    assert (
        api.post("/api/v1/work-items", {"key": "t1", "queue": "tight"}, token).json_body[
            "admission"
        ]
        == "admitted"
    )
    r = api.post("/api/v1/work-items", {"key": "t2", "queue": "tight"}, token)
    assert r.json_body["admission"] == "rejected" and r.json_body["code"] == "capacity_exhausted"
    assert_problem(api.post("/api/v1/work-items/t2/lease", {}, token), 409, "work_not_admitted")
    api.post("/api/v1/work-items", {"key": "w1", "queue": "waits"}, token)
    r = api.post("/api/v1/work-items", {"key": "w2", "queue": "waits"}, token)
    assert r.json_body["admission"] == "waiting"
    # Completing w1 admits w2.
    g = api.post("/api/v1/work-items/w1/lease", {}, token).json_body
    api.post("/api/v1/work-items/w1/complete", {"lease_id": g["lease_id"], "epoch": 1}, token)
    assert WorkItem.objects.get(key="w2").admission == "admitted"


# deliberate: a table of cases, one row a case (data, alike in shape only).
@pytest.mark.parametrize(
    ("path", "raw", "status", "code"),
    [
        ("/api/v1/work-items", b"{not json", 400, "validation_error"),
        ("/api/v1/work-items", b"[1, 2]", 400, "validation_error"),
        ("/api/v1/work-items", b'{"key": 12, "queue": []}', 400, "validation_error"),
        ("/api/v1/work-items", b'{"key": "bad key with spaces"}', 400, "validation_error"),
        ("/api/v1/work-items", b'{"key": "a\\u0000b"}', 400, "validation_error"),
        (
            "/api/v1/work-items",
            b'{"key": "k", "policy": {"ttl_ms": 1000, "renew_after_ms": 900}}',
            400,
            "validation_error",
        ),
        ("/api/v1/work-items/order-1/lease", b'{"ttl_ms": "soon"}', 400, "validation_error"),
        ("/api/v1/work-items/order-1/lease", b'{"ttl_ms": -5}', 400, "validation_error"),
        ("/api/v1/work-items/nope/lease", b"{}", 404, "not_found"),
        ("/api/v1/leases/LEASE/renew", b'{"epoch": "one"}', 400, "validation_error"),
        (
            "/api/v1/leases/LEASE/renew",
            b'{"epoch": 99999999999999999999999}',
            400,
            "validation_error",
        ),
        ("/api/v1/leases/LEASE/renew", b'{"epoch": 7}', 409, "stale_epoch"),
        ("/api/v1/leases/not-a-uuid/renew", b'{"epoch": 1}', 404, "not_found"),
        (
            "/api/v1/leases/00000000-0000-0000-0000-000000000000/renew",
            b'{"epoch": 1}',
            404,
            "not_found",
        ),
        ("/api/v1/leases/renew", b'{"leases": "all"}', 400, "validation_error"),
        ("/api/v1/effects", b'{"lease_id": "LEASE", "epoch": 1}', 400, "validation_error"),
        (
            "/api/v1/effects",
            b'{"lease_id": "LEASE", "epoch": 1, "kind": "k", "target": "t", '
            b'"idempotency_key": "i", "payload": {"x": "\\u0000"}}',
            400,
            "validation_error",
        ),
        (
            "/api/v1/effects/00000000-0000-0000-0000-000000000000/outcome",
            b'{"outcome": "applied"}',
            404,
            "not_found",
        ),
        ("/api/v1/effects/EFFECT/outcome", b'{"outcome": "maybe"}', 400, "validation_error"),
        (
            "/api/v1/leases/LEASE/checkpoints",
            b'{"epoch": 1, "data": "' + b"x" * 300_000 + b'"}',
            400,
            "validation_error",
        ),
    ],
)
def test_bad_input_gets_a_clear_code_and_writes_nothing(api, holder, path, raw, status, code):
    token, grant = holder
    effect = api.post(
        "/api/v1/effects",
        {
            "lease_id": grant["lease_id"],
            "epoch": 1,
            "kind": "k",
            "target": "t",
            "idempotency_key": "base",
        },
        token,
    )
    path = path.replace("LEASE", grant["lease_id"]).replace("EFFECT", effect.json_body["effect_id"])
    raw = raw.replace(b"LEASE", grant["lease_id"].encode())
    before = row_counts()
    assert_problem(api.post(path, token=token, raw=raw), status, code)
    assert row_counts() == before


def test_a_two_megabyte_checkpoint_is_refused_before_parsing(api, holder):
    token, grant = holder
    before = row_counts()
    raw = b'{"epoch": 1, "data": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert_problem(
        api.post(f"/api/v1/leases/{grant['lease_id']}/checkpoints", token=token, raw=raw),
        413,
        "validation_error",
    )
    assert row_counts() == before


@pytest.mark.parametrize("auth", [None, "lb_forged-token", "", "x" * 5000])
def test_a_missing_or_forged_token_is_unauthenticated(api, holder, auth):
    _, grant = holder
    before = row_counts()
    for path, body in [
        ("/api/v1/work-items", {"key": "sneaky"}),
        (f"/api/v1/leases/{grant['lease_id']}/renew", {"epoch": 1}),
        (
            "/api/v1/effects",
            {
                "lease_id": grant["lease_id"],
                "epoch": 1,
                "kind": "k",
                "target": "t",
                "idempotency_key": "z",
            },
        ),
    ]:
        r = api.post(path, body, auth)
        assert_problem(r, 401, "unauthenticated")
        assert r["WWW-Authenticate"].startswith("Bearer")
    assert row_counts() == before


def test_the_openapi_schema_lists_the_contract_paths(api):
    r = api.get("/api/v1/openapi.json")
    assert r.status_code == 200
    paths = r.json_body["paths"]
    for p in [
        "/api/v1/work-items",
        "/api/v1/work-items/{key}",
        "/api/v1/work-items/{key}/lease",
        "/api/v1/leases/{lease_id}/renew",
        "/api/v1/leases/renew",
        "/api/v1/leases/{lease_id}/release",
        "/api/v1/leases/{lease_id}/checkpoints",
        "/api/v1/effects",
        "/api/v1/effects/{effect_id}/outcome",
        "/api/v1/fencing/keys",
        "/api/v1/recipient-reports",
        "/api/v1/fencing/check",
    ]:
        assert p in paths, p


def test_fencing_keys_verify_an_issued_token(api, holder):
    from leaseboard.domain import fencing

    _, grant = holder
    keys = fencing.public_keys_from_jwks(api.get("/api/v1/fencing/keys").json_body)
    with connection.cursor() as cur:
        cur.execute("SELECT (extract(epoch from now()) * 1000)::bigint")
        now = cur.fetchone()[0]
    claims = fencing.verify_token(
        grant["fencing_token"], public_keys=keys, now_ms=now, work_key="order-1"
    )
    assert claims.epoch == 1 and claims.lease_id == grant["lease_id"]


def test_a_recipient_report_lands_in_the_effect_history(api, recipient, holder):
    _, credential = recipient("payments")
    r = api.post(
        "/api/v1/recipient-reports",
        {
            "work_key": "order-1",
            "epoch": 0,
            "high_water": 1,
            "reason": "stale_epoch",
            "recipient": "someone-else",  # ignored: the credential names the recipient
        },
        credential,
    )
    assert r.status_code == 201 and r.json_body["current_epoch"] == 1
    e = Effect.objects.get(source="recipient")
    assert (e.decision, e.refusal_code, e.target) == ("refused", "stale_epoch", "payments")


def test_healthz_reports_the_database(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["checks"]["database"]["ok"] is True


def test_completing_through_another_items_path_changes_nothing(api, agent, holder):
    token, grant = holder
    api.post("/api/v1/work-items", {"key": "order-2"}, token)
    before = row_counts()
    body = {"lease_id": grant["lease_id"], "epoch": 1}
    assert_problem(
        api.post("/api/v1/work-items/order-2/complete", body, token), 400, "validation_error"
    )
    assert row_counts() == before
    assert WorkItem.objects.get(key="order-1").status == "open"
    r = api.post("/api/v1/work-items/order-1/complete", body, token)
    assert r.status_code == 200 and r.json_body["status"] == "completed"


def test_acquiring_a_completed_work_item_is_a_refusal_not_a_500(api, holder):
    token, grant = holder
    body = {"lease_id": grant["lease_id"], "epoch": 1}
    assert api.post("/api/v1/work-items/order-1/complete", body, token).status_code == 200
    refusal = assert_problem(
        api.post("/api/v1/work-items/order-1/lease", token=token, raw=b""),
        409,
        "work_not_admitted",
    )
    # The work item's status travels as work_status: `status` stays the HTTP status.
    assert refusal["work_status"] == "completed" and refusal["decision"] == "admission"


def test_the_default_acquire_sends_no_body_at_all(api, agent):
    _, token = agent()
    assert api.post("/api/v1/work-items", {"key": "bare-1"}, token).status_code == 201
    r = api.post("/api/v1/work-items/bare-1/lease", token=token, raw=b"")
    assert r.status_code == 201 and r.json_body["epoch"] == 1


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/api/v1/nope", 404, None),
        ("POST", "/api/v1/work-items/a/b/lease", 404, None),
        ("GET", "/api/v2/work-items", 404, None),
        ("GET", "/api/", 404, None),
        ("GET", "/api/v1/work-items", 405, "POST"),
        ("DELETE", "/api/v1/leases/00000000-0000-0000-0000-000000000000/renew", 405, "POST"),
        ("PUT", "/api/v1/fencing/keys", 405, "GET"),
    ],
)
def test_unrouted_api_paths_and_methods_answer_problems(api, agent, method, path, status, allow):
    _, token = agent()
    r = api.call(method, path, None, token)
    code = "not_found" if status == 404 else "validation_error"
    body = assert_problem(r, status, code)
    assert body["instance"] == path
    if allow:
        assert r["Allow"] == allow


def test_outside_the_api_a_missing_page_is_still_html(client):
    r = client.get("/no-such-page")
    assert r.status_code == 404 and not r["Content-Type"].startswith("application/problem")


def test_a_rate_limited_answer_is_the_declared_429(api, agent, settings):
    settings.LEASEBOARD_RATE_LIMIT_AGENT = (2, 60)
    _, token = agent()
    for _ in range(2):
        assert api.get("/api/v1/work-items/nope", token).status_code == 404
    r = api.post("/api/v1/work-items", {"key": "too-many"}, token)
    body = assert_problem(r, 429, "rate_limited")
    assert int(r["Retry-After"]) >= 1 and body["limit"] == "credential"
