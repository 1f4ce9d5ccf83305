"""Security review findings on input bounds (issue 11, part 5), replayed as they were
reported. Each test failed on the code the review looked at: timing fields above 2^31-1 ms
admitted (never leasable on PostgreSQL, a 30-day lease on SQLite), NUL and lone surrogates
reaching the database (500s in the API and the dashboard filters, a CSV export cut off
mid-body), keys with `/` admitted but unreachable, a lax `epoch`, and a batch renew that ran
one locking transaction per copy of the same id."""

from __future__ import annotations

import json
import textwrap

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import Checkpoint, Effect, Lease, WorkItem
from leaseboard.domain.errors import ValidationFailed
from tests.api.schema_check import CheckedApiClient
from tests.builders import grant_break_glass, make_user
from tests.security.embedded import manage

pytestmark = [pytest.mark.postgres]

INT32_MAX = 2**31 - 1
DAY_MS = 24 * 3600 * 1000


def problem(response, status: int = 400, code: str = "validation_error") -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = json.loads(response.content)
    assert body["code"] == code, body
    return body


@pytest.fixture
def api(client):  # type: ignore[no-untyped-def]
    """Every refusal here is also one the OpenAPI document declares."""
    return CheckedApiClient(client)


@pytest.fixture
def token(agent):  # type: ignore[no-untyped-def]
    return agent("finder")[1]


@pytest.fixture
def grant(api, token):  # type: ignore[no-untyped-def]
    assert api.post("/api/v1/work-items", {"key": "bounds-1"}, token).status_code == 201
    r = api.post("/api/v1/work-items/bounds-1/lease", {}, token)
    assert r.status_code == 201, r.content
    return r.json_body


# -- timing bounds -------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "policy",
    [
        # Was admitted, then every acquire was a 500 NumericValueOutOfRange on PostgreSQL.
        {"ttl_ms": INT32_MAX + 1, "max_lifetime_ms": INT32_MAX + 1},
        {"lock_delay_ms": INT32_MAX + 1},
        {"ttl_ms": 30 * DAY_MS, "max_lifetime_ms": 30 * DAY_MS},
        # Below 2^31 but past LEASE_MAX_LIFETIME_MS: a 20-day lease for whoever asked.
        {"ttl_ms": 20 * DAY_MS, "max_lifetime_ms": 20 * DAY_MS},
        {"max_lifetime_ms": 20 * DAY_MS},
    ],
)
def test_finding_timing_beyond_the_bounds_is_refused_at_admission(api, token, policy):
    body = problem(api.post("/api/v1/work-items", {"key": "long-1", "policy": policy}, token))
    assert body["param"].startswith("policy")
    assert not WorkItem.objects.filter(key="long-1").exists()


@pytest.mark.django_db
def test_finding_a_stored_out_of_range_timing_is_refused_not_a_500(api, token, settings):
    """A row admitted before the bound (or edited in the database): acquire and break-glass
    answer a clear refusal instead of NumericValueOutOfRange."""
    from leaseboard.core.authority import Actor
    from leaseboard.takeovers.services import takeover_break_glass

    assert api.post("/api/v1/work-items", {"key": "legacy-1"}, token).status_code == 201
    WorkItem.objects.filter(key="legacy-1").update(timing={"lock_delay_ms": INT32_MAX + 1})
    problem(api.post("/api/v1/work-items/legacy-1/lease", {}, token))
    op = make_user("glass", "operator")
    grant_break_glass(op)
    from django.contrib.auth import get_user_model

    op = get_user_model().objects.get(id=op.id)
    with pytest.raises(ValidationFailed):
        takeover_break_glass(
            work_key="legacy-1",
            actor=Actor.human(op),
            reason_category="incident",
            reason_text="stuck",
        )
    assert not Lease.objects.filter(work_item__key="legacy-1").exists()


def test_finding_on_sqlite_an_agent_cannot_admit_a_lease_past_the_lifetime_cap(tmp_path):
    assert manage(tmp_path, "migrate", "--noinput").returncode == 0
    script = textwrap.dedent(
        """
        from leaseboard.core.services.work import work_admit
        from leaseboard.domain.errors import ValidationFailed
        try:
            work_admit(key="long", timing={"ttl_ms": 30 * 86400000,
                                           "max_lifetime_ms": 30 * 86400000}, by=None)
        except ValidationFailed as exc:
            print("refused", exc.extra.get("param"))
        else:
            print("admitted")
        """
    )
    out = manage(tmp_path, "shell", "-c", script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("refused policy."), out.stdout


# -- NUL and lone surrogates in the API ------------------------------------------------------

HOSTILE = ["a\x00b", "a\ud800b", "\udfff"]


def _raw(body: dict) -> bytes:
    # json.dumps escapes a lone surrogate as \\ud800, which is how a client sends one.
    return json.dumps(body).encode()


@pytest.mark.django_db
@pytest.mark.parametrize("text", HOSTILE)
def test_finding_hostile_strings_in_api_bodies_are_a_validation_error(api, token, grant, text):
    lease, epoch = grant["lease_id"], grant["epoch"]
    effect = {
        "lease_id": lease,
        "epoch": epoch,
        "kind": "k",
        "target": "t",
        "idempotency_key": "i",
    }
    requests = [
        ("/api/v1/work-items", {"key": "ok-key", "title": text}),
        ("/api/v1/work-items", {"key": "ok-key", "scope": {"note": text}}),
        ("/api/v1/work-items", {"key": "ok-key", "scope": {text: 1}}),
        (f"/api/v1/leases/{lease}/checkpoints", {"epoch": epoch, "data": {"s": text}}),
        (f"/api/v1/leases/{lease}/checkpoints", {"epoch": epoch, "data": [text]}),
        (f"/api/v1/leases/{lease}/checkpoints", {"epoch": epoch, "data": {text: 1}}),
        ("/api/v1/effects", {**effect, "target": text}),
        ("/api/v1/effects", {**effect, "idempotency_key": text}),
        ("/api/v1/effects", {**effect, "payload": {"x": [{"y": text}]}}),
        (
            "/api/v1/recipient-reports",
            {"work_key": "bounds-1", "reason": "stale_epoch", "recipient": text},
        ),
    ]
    before = (WorkItem.objects.count(), Checkpoint.objects.count(), Effect.objects.count())
    for path, body in requests:
        problem(api.post(path, token=token, raw=_raw(body)))
    assert (WorkItem.objects.count(), Checkpoint.objects.count(), Effect.objects.count()) == before


@pytest.mark.django_db
@pytest.mark.parametrize("segment", ["%00", "a%00b", "%ED%A0%80", "x%C0"])
def test_finding_hostile_path_keys_are_refused_not_a_500(api, token, segment):
    for method, path in [
        ("GET", f"/api/v1/work-items/{segment}"),
        ("POST", f"/api/v1/work-items/{segment}/lease"),
        ("POST", f"/api/v1/work-items/{segment}/complete"),
    ]:
        body = (
            {"lease_id": "00000000-0000-0000-0000-000000000000", "epoch": 1}
            if path.endswith("complete")
            else {}
        )
        r = api.call(method, path, body if method == "POST" else None, token)
        assert r.status_code in (400, 404), (path, r.status_code, r.content[:300])
        assert r["Content-Type"].startswith("application/problem+json")


# -- the key alphabet --------------------------------------------------------------------------


@pytest.mark.django_db
def test_finding_a_key_with_a_slash_is_refused_because_no_path_could_reach_it(api, token):
    body = problem(api.post("/api/v1/work-items", {"key": "team/job-1"}, token))
    assert body["param"] == "key" and "/" not in body["detail"].split("characters")[-1]
    assert not WorkItem.objects.filter(key="team/job-1").exists()
    # Every character the alphabet allows survives a round trip through the item's path.
    key = "Ab9._:@-z"
    assert api.post("/api/v1/work-items", {"key": key}, token).status_code == 201
    assert api.get(f"/api/v1/work-items/{key}", token).json_body["key"] == key
    assert api.post(f"/api/v1/work-items/{key}/lease", {}, token).status_code == 201


# -- a strict epoch ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("epoch", ["true", '"1"', "1.0", "null", "-1"])
def test_finding_epoch_is_a_strict_integer(api, token, grant, epoch):
    lease = grant["lease_id"]
    raw = b'{"epoch": ' + epoch.encode() + b"}"
    before = Lease.objects.get(id=lease).renew_count
    problem(api.post(f"/api/v1/leases/{lease}/renew", token=token, raw=raw))
    batch = '{"leases": [{"lease_id": "' + lease + '", "epoch": ' + epoch + "}]}"
    problem(api.post("/api/v1/leases/renew", token=token, raw=batch.encode()))
    assert Lease.objects.get(id=lease).renew_count == before


# -- batch renew ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_finding_a_batch_of_copies_of_one_id_is_answered_once(api, token, grant):
    lease = grant["lease_id"]
    body = {"leases": [{"lease_id": lease, "epoch": 7}] * 1000}
    with CaptureQueriesContext(connection) as queries:
        r = api.post("/api/v1/leases/renew", body, token)
    assert r.status_code == 200
    results = r.json_body["results"]
    assert len(results) == 1000
    assert {(x["lease_id"], x["ok"], x["code"]) for x in results} == {(lease, False, "stale_epoch")}
    # One compare-and-set and one explained refusal, not a thousand locking transactions
    # (a refusal is answered from one read, without a lock: renewals._renew_misses).
    locks = [q for q in queries.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locks) <= 1, len(locks)
    assert len(queries.captured_queries) < 30


# -- the dashboard's filters -------------------------------------------------------------------

NUL_QUERIES = ["%00", "a%00b", "%ED%A0%80", "%C0%80"]


@pytest.mark.django_db
@pytest.mark.parametrize("value", NUL_QUERIES)
def test_finding_hostile_dashboard_filters_answer_a_page_not_a_500(client, value):
    client.force_login(make_user("watcher", "operator", "manager"))
    pages = [
        f"/?q={value}",
        f"/?holder={value}",
        f"/?queue={value}",
        f"/?cursor={value}",
        f"/work/{value}",
        f"/work/ok?lease={value}",
        f"/alerts/?show={value}&cursor={value}",
        f"/audit/?cursor={value}",
        f"/takeovers/request/{value}",
        f"/takeovers/bulk?key={value}",
    ] + [
        f"/takeovers/interventions/{page}?{name}={value}"
        for page in ("", "summary")
        for name in ("requester", "approver", "agent", "queue", "date_from", "cursor")
    ]
    for url in pages:
        r = client.get(url)
        assert r.status_code in (200, 404), (url, r.status_code)


@pytest.mark.django_db
@pytest.mark.parametrize("value", NUL_QUERIES)
def test_finding_the_csv_export_with_a_hostile_filter_is_a_whole_file(client, value):
    client.force_login(make_user("counter", "manager"))
    for name in ("requester", "approver", "agent", "queue", "date_to"):
        r = client.get(f"/takeovers/interventions/export.csv?{name}={value}")
        assert r.status_code == 200
        text = b"".join(r.streaming_content).decode()  # raised mid-body before
        assert text.splitlines()[0].startswith("id,") and len(text.splitlines()) == 1
