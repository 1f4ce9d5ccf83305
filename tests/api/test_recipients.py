"""Recipients as principals of their own, through the HTTP API: their credential (printed
once, stored hashed, rotatable, audited), the refusal reports only they may file (grouped
into one counted alert per incident), and the online fencing check (CheckSequencer)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import RequestFactory

from leaseboard.api.recipients import RecipientBearer
from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert, AuditEntry, Effect, Recipient
from leaseboard.core.models.executors import hash_token
from leaseboard.core.services import leases as ls
from tests.builders import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def report(api, credential: str, reason: str = "stale_epoch", **extra):  # type: ignore[no-untyped-def]
    body = {"work_key": "order-1", "epoch": 1, "high_water": 2, "reason": reason, **extra}
    return api.post("/api/v1/recipient-reports", body, credential)


def check(api, credential: str, token: str):  # type: ignore[no-untyped-def]
    return api.post("/api/v1/fencing/check", {"fencing_token": token}, credential)


def test_an_agent_credential_is_forbidden_on_the_recipients_endpoints(api, holder):
    agent_token, grant = holder
    for response in (report(api, agent_token), check(api, agent_token, grant["fencing_token"])):
        assert response.status_code == 403, response.content
        assert response.json_body["code"] == "forbidden"
    assert not Effect.objects.filter(source="recipient").exists()
    assert not Alert.objects.exists()


def test_the_recipient_bearer_knows_a_recipients_credential_and_no_other(recipient, holder):
    rec, credential = recipient("ledger")
    agent_token, _ = holder
    bearer, request = RecipientBearer(), RequestFactory().post("/api/v1/fencing/check")
    assert bearer.authenticate(request, credential) == rec
    assert bearer.authenticate(request, agent_token) is None
    assert bearer.authenticate(request, "lbr_not-a-credential") is None


def test_the_recipients_router_serves_the_public_keys_without_a_credential(api):
    r = api.get("/api/v1/fencing/keys")
    assert r.status_code == 200 and r.json_body["keys"], r.content


def test_a_recipient_credential_is_not_an_agents(api, recipient, holder):
    _, credential = recipient("ledger")
    r = api.post("/api/v1/work-items/order-1/lease", {}, credential)
    assert r.status_code == 401 and r.json_body["code"] == "unauthenticated"
    assert report(api, "lbr_not-a-credential").status_code == 401


def test_fifty_reports_of_one_incident_make_one_alert_counting_fifty(api, recipient, holder):
    _, credential = recipient("ledger")
    for _ in range(50):
        assert report(api, credential).status_code == 201
    alert = Alert.objects.get(kind="recipient_refusal")
    assert alert.occurrences == 50
    assert "ledger" in alert.message and alert.detail["reason"] == "stale_epoch"
    assert Effect.objects.filter(source="recipient", target="ledger").count() == 50
    # Another reason, or another recipient, is another incident.
    assert report(api, credential, reason="expired").status_code == 201
    _, other = recipient("records")
    assert report(api, other).status_code == 201
    counts = sorted(Alert.objects.values_list("occurrences", flat=True))
    assert counts == [1, 1, 50]


def test_the_fencing_check_says_valid_now_and_invalid_once_superseded(api, recipient, holder):
    _, credential = recipient("payments")
    agent_token, grant = holder
    r = check(api, credential, grant["fencing_token"])
    assert r.status_code == 200, r.content
    assert r.json_body["valid"] is True and r.json_body["current_epoch"] == 1
    assert (r.json_body["certainty"], r.json_body["code"]) == ("active", None)

    # Revoked, no successor yet: not current, and said why.
    approver = Actor.human(make_user("abe-check", "approver"))
    ls.lease_revoke(
        lease_id=grant["lease_id"], actor=approver, reason_category="stuck", reason_text="stuck"
    )
    r = check(api, credential, grant["fencing_token"])
    assert (r.json_body["valid"], r.json_body["code"]) == (False, "lease_revoked")

    # A successor at epoch 2: the old token's epoch is superseded.
    again = api.post("/api/v1/work-items/order-1/lease", {}, agent_token)
    assert again.status_code == 201 and again.json_body["epoch"] == 2
    r = check(api, credential, grant["fencing_token"])
    assert r.json_body == {
        **r.json_body,
        "valid": False,
        "current_epoch": 2,
        "code": "stale_epoch",
        "epoch": 1,
    }
    assert check(api, credential, again.json_body["fencing_token"]).json_body["valid"] is True

    r = check(api, credential, "not-a-token")
    assert (r.json_body["valid"], r.json_body["code"]) == (False, "malformed")


def test_the_fencing_check_refuses_a_token_past_its_expiry(api, recipient, holder, db_clock):
    _, credential = recipient("payments")
    _, grant = holder
    db_clock.advance(grant["ttl_ms"] + 1)
    r = check(api, credential, grant["fencing_token"])
    assert (r.json_body["valid"], r.json_body["code"]) == (False, "expired")


def test_create_recipient_prints_the_credential_once_and_keeps_only_its_hash(api, holder):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_recipient", "deploys", stdout=out, stderr=err)
    credential = out.getvalue().strip()
    assert credential.startswith("lbr_") and credential not in err.getvalue()
    row = Recipient.objects.get(name="deploys")
    assert row.token_hash == hash_token(credential)
    assert credential not in str(Recipient.objects.values().get(name="deploys"))
    assert report(api, credential).status_code == 201

    out = io.StringIO()
    call_command("recipient_token", "rotate", "deploys", stdout=out, stderr=io.StringIO())
    rotated = out.getvalue().strip()
    assert report(api, credential).status_code == 401  # refused from the commit on
    assert report(api, rotated).status_code == 201
    call_command("recipient_token", "revoke", "deploys", stdout=io.StringIO())
    assert report(api, rotated).status_code == 401
    actions = list(
        AuditEntry.objects.filter(object_type="recipient")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == ["recipient.create", "recipient.token_rotate", "recipient.token_revoke"]
