"""Revoke, bulk revoke and quarantine through the dashboard: forms, CSRF, roles, outcomes."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import AuditEntry, BulkRevoke, Executor, Lease, Quarantine
from tests.builders import leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

REASON = {"reason_category": "misbehaving", "reason_text": "sends duplicate refunds"}


def _csrf_client(user) -> tuple[Client, str]:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/login/")
    return client, client.cookies["csrftoken"].value


def test_the_work_item_page_asks_for_a_category_and_a_reason_before_revoking(agent):
    executor, _ = agent("dup-bot")
    lease = leased_item(executor, key="w-1")
    client, token = _csrf_client(make_user("olivia", "operator"))
    html = client.get("/work/w-1").content.decode()
    form = html[
        html.index('id="revoke-form"') : html.index("</form>", html.index('id="revoke-form"'))
    ]
    assert 'data-confirm="Revoke dup-bot' in form
    assert '<label for="revoke-reason_category">' in form and '<option value="" selected>' in form
    assert '<label for="revoke-reason_text">' in form

    url = f"/leases/{lease.id}/revoke"
    assert client.post(url, REASON).status_code == 403  # no CSRF token
    response = client.post(url, {**REASON, "csrfmiddlewaretoken": token, "next": "/work/w-1"})
    assert response.status_code == 302 and response["Location"] == "/work/w-1"
    lease.refresh_from_db()
    assert (lease.state, lease.end_reason) == ("revoked", "misbehaving: sends duplicate refunds")

    manager = Client()
    manager.force_login(make_user("mia", "manager"))
    assert 'id="revoke-form"' not in manager.get("/work/w-1").content.decode()


def test_bulk_revoke_lists_the_picked_leases_then_answers_per_lease(agent):
    executor, _ = agent("fleet")
    leases = [leased_item(executor, key=f"b-{i}") for i in range(3)]
    client, token = _csrf_client(make_user("abe", "approver"))  # approvers may revoke too
    with CaptureQueriesContext(connection) as few:
        client.get("/leases/revoke?key=b-0")
    with CaptureQueriesContext(connection) as many:
        page = client.get("/leases/revoke?key=b-0&key=b-1&key=b-2&key=nope")
    assert len(few.captured_queries) == len(many.captured_queries)
    html = page.content.decode()
    assert re.findall(r'name="lease" value="([0-9a-f-]{36})"', html) == [str(x.id) for x in leases]
    key = re.search(r'name="idempotency_key" value="(\w+)"', html).group(1)

    form = {**REASON, "idempotency_key": key, "csrfmiddlewaretoken": token}
    form["lease"] = [str(leases[0].id), str(leases[2].id)]  # b-1 unticked
    response = client.post("/leases/revoke?key=b-0&key=b-1&key=b-2", form)
    assert response.status_code == 200
    html = response.content.decode()
    assert "2 of 2 lease(s) revoked" in html
    assert [
        x for x in Lease.objects.order_by("work_item__key").values_list("state", flat=True)
    ] == [
        "revoked",
        "active",
        "revoked",
    ]
    # The same form sent again (a double click, a reload) revokes nothing more.
    again = client.post("/leases/revoke?key=b-0&key=b-1&key=b-2", form)
    assert "2 of 2 lease(s) revoked" in again.content.decode()
    assert BulkRevoke.objects.count() == 1
    assert AuditEntry.objects.filter(action="lease.revoke").count() == 2


def test_a_bulk_revoke_without_a_reason_is_a_form_error(agent, operator_client):
    executor, _ = agent()
    lease = leased_item(executor, key="nr-1")
    form = {"reason_category": "", "reason_text": "", "idempotency_key": "k", "lease": [lease.id]}
    response = operator_client.post("/leases/revoke?key=nr-1", form)
    assert response.status_code == 400
    lease.refresh_from_db()
    assert lease.state == "active" and not BulkRevoke.objects.exists()


@pytest.mark.parametrize("role", ["manager", None])
def test_bulk_revoke_is_refused_without_the_role(client, agent, role):
    executor, _ = agent()
    lease = leased_item(executor, key="rr-1")
    client.force_login(make_user(f"u-{role}", *([role] if role else [])))
    assert client.get("/leases/revoke?key=rr-1").status_code == 403
    form = {**REASON, "idempotency_key": "k", "lease": [lease.id]}
    assert client.post("/leases/revoke", form).status_code == 403
    assert not BulkRevoke.objects.exists()


def test_an_operator_quarantines_and_an_approver_lifts(agent, django_capture_on_commit_callbacks):
    bad, _ = agent("loopy")
    leased_item(bad, key="q-1")
    op_client, op_token = _csrf_client(make_user("olga", "operator"))
    page = op_client.get(f"/executors/{bad.id}").content.decode()
    assert 'id="quarantine-form"' in page and 'id="lift-form"' not in page
    with django_capture_on_commit_callbacks(execute=True):
        response = op_client.post(
            f"/executors/{bad.id}/quarantine", {**REASON, "csrfmiddlewaretoken": op_token}
        )
    assert response.status_code == 302
    assert not Executor.objects.get(id=bad.id).is_active
    assert Lease.objects.get(work_item__key="q-1").state == "revoked"
    page = op_client.get(f"/executors/{bad.id}").content.decode()
    assert "Quarantined" in page and "sends duplicate refunds" in page
    assert 'id="lift-form"' not in page  # operators quarantine; approvers lift
    lift = {"note": "fixed", "csrfmiddlewaretoken": op_token}
    assert op_client.post(f"/executors/{bad.id}/lift-quarantine", lift).status_code == 403

    ap_client, ap_token = _csrf_client(make_user("abe", "approver"))
    assert 'id="lift-form"' in ap_client.get(f"/executors/{bad.id}").content.decode()
    response = ap_client.post(
        f"/executors/{bad.id}/lift-quarantine", {"note": "fixed", "csrfmiddlewaretoken": ap_token}
    )
    assert response.status_code == 302
    assert Executor.objects.get(id=bad.id).is_active
    assert Quarantine.objects.get().lifted_by.username == "abe"
