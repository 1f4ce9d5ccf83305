"""The settings pages through the browser's HTTP (Django's client, CSRF enforced): an
admin configures; bad input is a field error and saves nothing; nobody else gets in."""

from __future__ import annotations

import pytest
from django.test import Client

from leaseboard.core.models import AuditEntry, EffectRule, Queue
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def admin_client():
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("ada", "admin"))
    return client


def post(client: Client, path: str, data: dict) -> object:
    client.get("/login/")
    return client.post(path, {**data, "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


QUEUE = {
    "name": "payments",
    "capacity": "2",
    "overflow": "wait",
    "reconciliation_gate": "on",
    "ttl_ms": "",
    "renew_after_ms": "",
    "jeopardy_after_ms": "",
    "lock_delay_ms": "",
    "max_lifetime_ms": "",
    "scopes": "",
    "leases_per_agent": "",
    "windows_tz": "UTC",
    "windows": "",
}
RULE = {
    "name": "big-payments",
    "kind": "payment.*",
    "target": "*",
    "when": "payload.amount_cents > 50000",
    "decision": "require_approval",
    "note": "",
}


def errors_of(response) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    form = response.context["form"]
    return {k: [str(e) for e in v] for k, v in form.errors.items()}


def test_an_admin_creates_a_queue_and_a_rule_and_the_page_lists_them(admin_client):
    r = post(admin_client, "/settings/queues/new", QUEUE)
    assert r.status_code == 302 and r["Location"] == "/settings/queues/payments/"
    r = post(admin_client, "/settings/queues/payments/rules/new", RULE)
    assert r.status_code == 302
    page = admin_client.get("/settings/queues/payments/").content.decode()
    assert "big-payments" in page and "payload.amount_cents &gt; 50000" in page
    assert Queue.objects.get(name="payments").capacity == 2
    home = admin_client.get("/settings/").content.decode()
    assert 'href="/settings/queues/payments/"' in home
    assert 'href="/settings/"' in home  # the Settings link in the header


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"when": "payload.amount_cents >"}, "when", "column 23: the condition ends too early"),
        ({"when": "evidence.checkpoint_agee < 5"}, "when", "unknown field"),
        ({"kind": "p" * 101}, "kind", "matches nothing"),
        ({"name": "Big Payments"}, "name", "a-z 0-9"),
    ],
)
def test_a_bad_rule_is_a_field_error_and_nothing_is_saved(admin_client, changes, field, message):
    post(admin_client, "/settings/queues/new", QUEUE)
    audit = AuditEntry.objects.count()
    r = post(admin_client, "/settings/queues/payments/rules/new", {**RULE, **changes})
    assert r.status_code == 200
    assert any(message in e for e in errors_of(r)[field]), errors_of(r)
    assert not EffectRule.objects.exists()
    assert AuditEntry.objects.count() == audit


def test_a_rule_behind_a_wider_unconditional_rule_is_refused(admin_client):
    post(admin_client, "/settings/queues/new", QUEUE)
    post(admin_client, "/settings/queues/payments/rules/new", {**RULE, "when": ""})
    r = post(
        admin_client,
        "/settings/queues/payments/rules/new",
        {**RULE, "name": "refunds", "kind": "payment.refund"},
    )
    assert any("matches nothing" in e for e in errors_of(r)["kind"])
    assert EffectRule.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"ttl_ms": "3000", "renew_after_ms": "2000"}, "ttl_ms"),
        ({"ttl_ms": "9000", "jeopardy_after_ms": "9000"}, "jeopardy_after_ms"),
        ({"windows": "funday 09:00-17:00"}, "windows"),
        ({"windows_tz": "Mars/Olympus", "windows": "mon 09:00-10:00"}, "windows_tz"),
        ({"scopes": "env ="}, "scopes"),
        ({"capacity": "-3"}, "capacity"),
    ],
)
def test_bad_queue_settings_are_field_errors_and_nothing_is_saved(admin_client, changes, field):
    r = post(admin_client, "/settings/queues/new", {**QUEUE, **changes})
    assert r.status_code == 200
    assert field in errors_of(r), errors_of(r)
    assert not Queue.objects.filter(name="payments").exists()


@pytest.mark.parametrize("role", ["operator", "approver", "manager", None])
def test_nobody_but_an_admin_reaches_the_settings(role):
    client = Client()
    client.force_login(make_user("someone", *([role] if role else [])))
    assert client.get("/settings/").status_code == 403
    assert client.post("/settings/queues/new", QUEUE).status_code == 403
    assert not Queue.objects.filter(name="payments").exists()


def test_the_explain_page_names_the_rule(admin_client):
    post(admin_client, "/settings/queues/new", QUEUE)
    post(admin_client, "/settings/queues/payments/rules/new", RULE)
    form = {"queue": "payments", "work_key": "", "kind": "payment.refund", "target": "o-1"}
    r = post(admin_client, "/settings/explain", {**form, "payload": '{"amount_cents": 60000}'})
    body = r.content.decode()
    assert 'id="deciding-rule">big-payments<' in body and "require_approval" in body
    r = post(admin_client, "/settings/explain", {**form, "payload": '{"amount_cents": 40000}'})
    assert "by the queue's default" in r.content.decode()
    r = post(admin_client, "/settings/explain", {**form, "payload": "[1]"})
    assert "payload" in errors_of(r)


def test_a_new_agent_token_is_shown_once(admin_client):
    r = post(admin_client, "/settings/credentials/", {"name": "pay-bot", "queues": "default"})
    body = r.content.decode()
    assert 'id="secret-once">lb_' in body
    assert "lb_" not in admin_client.get("/settings/credentials/").content.decode()


def test_a_new_agent_names_its_queues_or_every_queue_and_an_admin_changes_them(admin_client):
    from leaseboard.core.models import AuditEntry, Executor

    refused = post(admin_client, "/settings/credentials/", {"name": "no-queues"})
    assert "name the queues this agent may" in refused.content.decode()
    assert not Executor.objects.filter(name="no-queues").exists()
    post(admin_client, "/settings/credentials/", {"name": "pay-bot", "queues": "default"})
    bot = Executor.objects.get(name="pay-bot")
    assert (bot.queues, bot.all_queues) == (["default"], False)
    post(admin_client, "/settings/credentials/pay-bot/scope", {"all_queues": "on"})
    bot.refresh_from_db()
    assert (bot.queues, bot.all_queues) == ([], True)
    change = AuditEntry.objects.get(action="agent.scope_change")
    assert change.before == {"name": "pay-bot", "queues": ["default"]}
    assert change.after == {"name": "pay-bot", "all_queues": True}
    page = admin_client.get("/settings/credentials/").content.decode()
    assert 'class="all-queues">every queue' in page


def test_an_admin_edits_the_rules_for_every_queue_on_their_page(admin_client):
    from leaseboard.core.models import EffectRule, GlobalPolicy

    rule = {"name": "big-refunds", "kind": "payment.refund", "target": "*", "decision": "deny"}
    rule["when"] = "payload.amount_cents > 5000000"
    r = post(admin_client, "/settings/global/rules/new", rule)
    assert r.status_code == 302 and r["Location"] == "/settings/global/"
    assert EffectRule.objects.get(queue__isnull=True).name == "big-refunds"
    page = admin_client.get("/settings/global/").content.decode()
    assert 'id="rule-big-refunds"' in page and "can only tighten" in page
    post(admin_client, "/settings/global/rules/default", {"default": "require_approval"})
    assert GlobalPolicy.objects.get(id=1).default_decision == "require_approval"
    post(admin_client, "/settings/global/rules/big-refunds/delete", {})
    assert not EffectRule.objects.filter(queue__isnull=True).exists()
    home = admin_client.get("/settings/").content.decode()
    assert 'id="global-rules-link"' in home and 'id="four-eyes-state">off' in home


def test_the_history_shows_each_changed_field_with_its_change_in_words(admin_client):
    post(admin_client, "/settings/queues/new", QUEUE)
    post(admin_client, "/settings/queues/payments/", {**QUEUE, "capacity": "5"})
    page = admin_client.get("/settings/history/").content.decode()
    row = page[page.index("queue.update") :].split("</tr>")[0]
    assert '<li class="diff-changed"><span class="diff-mark">~ changed</span> ' in row
    assert '<code class="diff-path">capacity</code>: <del>2</del> → <ins>5</ins>' in row
    assert "overflow</code>" not in row  # unchanged fields are not listed
    created = page[page.index("queue.create") :].split("</tr>")[0]
    assert (
        '<span class="diff-mark">+ added</span> <code class="diff-path">capacity</code>' in created
    )
    assert "recorded JSON" in row  # the entry as recorded is still one click away
