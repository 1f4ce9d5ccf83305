"""Takeover views through Django's test client: roles on the server, CSRF on every
mutating endpoint, no self-approval, forms that refuse without writing, CSV export."""

from __future__ import annotations

import csv
import io
import re
import uuid

import pytest
from django.test import Client

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Lease
from leaseboard.takeovers import services
from leaseboard.takeovers.models import Intervention, TakeoverRequest
from tests.builders import effect_under, make_user, request_for

pytestmark = pytest.mark.usefixtures("fast_passwords")


def _login(user, csrf: bool = False) -> Client:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def _token(client: Client, url: str) -> str:
    page = client.get(url)
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert match, (url, page.status_code)
    return match.group(1).decode()


def test_an_operator_requests_from_the_work_item_page_and_an_approver_approves(people, scene):
    op = _login(people.operator, csrf=True)
    page = op.get(f"/work/{scene.key}")
    assert f"/takeovers/request/{scene.key}".encode() in page.content
    token = _token(op, f"/takeovers/request/{scene.key}")
    response = op.post(
        f"/takeovers/request/{scene.key}",
        {
            "reason_category": "stuck",
            "reason_text": "loops",
            "standing_minutes": 30,
            "csrfmiddlewaretoken": token,
        },
        HTTP_X_REQUEST_ID="req-http-1",
    )
    assert response.status_code == 302
    req = TakeoverRequest.objects.get()
    assert req.request_id == "req-http-1"

    ap = _login(people.approver, csrf=True)
    token = _token(ap, "/takeovers/pending/")
    response = ap.post(
        f"/takeovers/requests/{req.id}/approve",
        {"note": "go", "csrfmiddlewaretoken": token},
        HTTP_X_REQUEST_ID="req-http-2",
    )
    assert response.status_code == 302
    iv = Intervention.objects.get()
    entry = AuditEntry.objects.get(action="takeover.approve")
    assert (entry.actor_role, entry.request_id) == ("approver", "req-http-2")
    assert Lease.objects.get(id=scene.lease.id).state == "revoked"
    standing = op.get("/takeovers/standing/")
    assert b"data-expires-in-ms" in standing.content and scene.key.encode() in standing.content
    assert iv.grantee.user == people.operator


def test_the_requester_cannot_approve_their_own_request_over_http(people, scene):
    both = make_user("both", "operator", "approver")
    req = request_for(scene.key, both)
    client = _login(both, csrf=True)
    token = _token(client, "/takeovers/pending/")
    response = client.post(f"/takeovers/requests/{req.id}/approve", {"csrfmiddlewaretoken": token})
    assert response.status_code == 403
    assert TakeoverRequest.objects.get(id=req.id).status == "pending"
    assert Lease.objects.get(id=scene.lease.id).state == "active"
    # An operator without the approver role is refused before any service runs.
    other = request_for(scene.key + "x", people.operator) if False else req
    op = _login(people.operator)
    assert op.post(f"/takeovers/requests/{other.id}/approve").status_code == 403
    assert TakeoverRequest.objects.get(id=req.id).status == "pending"


def test_a_request_form_without_a_reason_is_a_form_error_not_a_write(people, scene):
    op = _login(people.operator)
    response = op.post(
        f"/takeovers/request/{scene.key}",
        {"reason_category": "stuck", "reason_text": "", "standing_minutes": 30},
    )
    assert response.status_code == 400
    assert b'id="id_reason_text-error"' in response.content
    response = op.post(
        f"/takeovers/request/{scene.key}",
        {"reason_category": "stuck", "reason_text": "x", "standing_minutes": 100000},
    )
    assert response.status_code == 400
    assert (
        not TakeoverRequest.objects.exists()
        and not AuditEntry.objects.filter(action__startswith="takeover").exists()
    )


@pytest.mark.parametrize(
    ("path", "role"),
    [
        ("/takeovers/request/{key}", "operator"),
        ("/takeovers/bulk", "operator"),
        ("/takeovers/interventions/{iv}/extend", "operator"),
        ("/takeovers/interventions/{iv}/complete", "operator"),
        ("/takeovers/interventions/{iv}/hand-back", "operator"),
        ("/takeovers/interventions/{iv}/assign", "operator"),
        ("/takeovers/interventions/{iv}/effects", "operator"),
        ("/takeovers/effects/{eid}/reconcile", "operator"),
        ("/takeovers/requests/{req}/approve", "approver"),
        ("/takeovers/requests/{req}/reject", "approver"),
        ("/takeovers/effects/{eid}/approve", "approver"),
        ("/takeovers/effects/{eid}/reject", "approver"),
        ("/takeovers/interventions/{iv}/review", "manager"),
    ],
)
def test_every_mutating_endpoint_needs_the_csrf_token(people, scene, path, role):
    req = request_for(scene.key, people.operator)
    iv = services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    url = path.format(key=scene.key, iv=iv.id, req=req.id, eid=uuid.uuid4())
    user = getattr(people, role)
    client = _login(user, csrf=True)
    before = AuditEntry.objects.count()
    assert client.post(url, {"note": "x", "reason": "x"}).status_code == 403
    assert AuditEntry.objects.count() == before


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/takeovers/pending/", "approver"),
        ("/takeovers/standing/", "operator"),
        ("/takeovers/interventions/", "manager"),
        ("/takeovers/interventions/summary", "manager"),
        ("/takeovers/interventions/export.csv", "manager"),
    ],
)
def test_pages_are_for_their_role_only(people, path, allowed):
    for role in ("operator", "approver", "manager"):
        status = _login(getattr(people, role)).get(path).status_code
        assert (status == 200) == (role == allowed), (role, status)
    assert Client().get(path).status_code == 302  # strangers go to sign-in


def test_managers_filter_read_and_export_intervention_records(people, scene, agent):
    req = request_for(scene.key, people.operator)
    iv = services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    services.standing_hand_back(
        intervention_pk=iv.id,
        actor=Actor.human(people.operator),
        lease_id=iv.lease_id,
        epoch=iv.epoch,
        note="fixed",
    )
    mgr = _login(people.manager)
    listing = mgr.get(f"/takeovers/interventions/?reason=stuck&agent={scene.agent.name}")
    assert f'id="intervention-{iv.id}"'.encode() in listing.content
    assert (
        b"intervention-"
        not in mgr.get("/takeovers/interventions/?reason=incident").content.split(b"<tbody>")[1]
    )
    detail = mgr.get(f"/takeovers/interventions/{iv.id}").content.decode()
    for kind in ("requested", "approved", "revoked", "granted", "handed_back"):
        assert f'data-kind="{kind}"' in detail
    export = mgr.get("/takeovers/interventions/export.csv?outcome=handed_back")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [r["id"] for r in rows] == [str(iv.id)]
    assert rows[0]["approved_by"] == people.approver.username
    summary = mgr.get("/takeovers/interventions/summary").content.decode()
    assert "stuck" in summary and scene.agent.name in summary
    assert AuditEntry.objects.filter(action__startswith="view").count() == 0


def test_the_summary_measures_decision_to_the_agents_first_refused_effect(people, scene, db_clock):
    from leaseboard.domain.errors import StaleEpoch
    from leaseboard.takeovers.selectors.records import InterventionFilters
    from leaseboard.takeovers.selectors.summary import summary

    req = request_for(scene.key, people.operator)
    db_clock.advance(90_000)
    services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    db_clock.advance(4_000)
    with pytest.raises(StaleEpoch):
        effect_under(scene.lease, scene.agent, "late", kind="k", target="t")
    s = summary(InterventionFilters())
    assert 90_000 <= s.median_request_to_decision_ms < 95_000
    assert 4_000 <= s.median_decision_to_first_refusal_ms < 9_000


def test_the_live_row_shows_the_pending_request_and_offers_approvers_to_decide(
    people, scene, agent
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.builders import leased_item

    other = leased_item(scene.agent, key=f"{scene.key}-other")  # no request on this one
    op = _login(people.operator)
    before = op.get("/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live")
    req = request_for(scene.key, people.operator)
    with CaptureQueriesContext(connection) as counted:
        page = op.get("/")
    html = page.content.decode()
    row = re.search(rf'<tr id="lease-{scene.lease.id}".*?</tr>', html, re.S)
    assert row is not None, html[:2000]
    assert f'data-pending-takeover="{req.id}"' in row.group(0)
    assert f"Takeover #{req.id} is waiting for an approver: {people.operator.username} asked" in (
        row.group(0)
    )
    assert "standing would go to <b>" in row.group(0) and "(the requester)" in row.group(0)
    # A second request cannot be made: the row no longer offers one, nor "Decide" to the
    # requester (no self-approval), while the other row still offers a request.
    assert "Request takeover" not in row.group(0) and ">Decide<" not in row.group(0)
    other_row = re.search(rf'<tr id="lease-{other.id}".*?</tr>', html, re.S)
    assert other_row is not None and "Request takeover" in other_row.group(0)
    assert "data-pending-takeover" not in other_row.group(0)
    # One query more than with no request waiting (tests/dashboard/views/test_dashboard.py: 8).
    assert len(counted.captured_queries) == 9
    # The approver is offered to decide, on the approvals page at this request.
    approver_page = _login(people.approver).get("/").content.decode()
    assert f'href="/takeovers/pending/#request-{req.id}">Decide' in approver_page
    # The fragment's version moves with the request, so the 2 s poll shows it.
    after = op.get("/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live")
    assert before["X-Leaseboard-Version"] != after["X-Leaseboard-Version"]
