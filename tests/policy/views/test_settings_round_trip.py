"""Every settings form round-trips what it edits (issue 33, part 6): configuration applied
as code, each form then saved unchanged the way a browser would submit it (the fields and
values the page rendered), and `config export` is byte-identical. Before, saving a queue's
notify page deleted its `notify.approvals`, and a note-only edit of a rule dropped its
`decide_within_ms` and `on_timeout`."""

from __future__ import annotations

from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import pytest

from leaseboard.core.authority import Actor
from leaseboard.policy.services.config import config_apply_text, config_dumps, config_export
from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

CONFIG = """
version = 1

[queues.payments]
capacity = 2
overflow = "reject"
reconciliation_gate = false
default_decision = "deny"

[queues.payments.timing]
ttl_ms = 9000
renew_after_ms = 3000
jeopardy_after_ms = 6000
lock_delay_ms = 500
max_lifetime_ms = 3600000

[queues.payments.envelope]
leases_per_agent = 3
scopes = { env = ["prod-*", "staging"], region = ["eu-?"] }

[queues.payments.envelope.windows]
tz = "Europe/Berlin"
open = [
  { days = "mon-fri", from = "08:00", to = "18:00" },
  { days = "sat,sun", from = "22:00", to = "02:00" },
]

[queues.payments.notify]
webhooks = [{ url = "https://hooks.example.com/a" }, { url = "https://hooks.example.com/b" }]
emails = ["ops@example.com", "oncall@example.com"]
kinds = ["jeopardy", "expired"]

[queues.payments.notify.approvals]
approvers = ["abe", "group:approver"]
emails = ["approvals@example.com"]
webhooks = [{ url = "https://hooks.slack.example.com/T1" }]

[queues.payments.notify.approvals.rules.big-payments]
approvers = ["group:finance"]
webhooks = [{ url = "https://hooks.slack.example.com/T2" }]

[[queues.payments.rules]]
name = "big-payments"
kind = "payment.*"
target = "order-*"
when = "has(payload.amount_cents) && payload.amount_cents > 50000"
decision = "require_approval"
note = "over 500.00"
decide_within_ms = 600000
on_timeout = "approve"

[[queues.payments.rules]]
name = "refunds"
kind = "payment.refund"
decision = "allow"

[people]
abe = ["approver", "operator", "break_glass"]
ada = ["admin"]
ari = ["admin"]
"""


class Forms(HTMLParser):
    """The controls of each <form> on a page, as a browser would submit them."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self._form: dict[str, Any] | None = None
        self._textarea: str | None = None
        self._select: tuple[str, bool] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._form = {
                "id": a.get("id", ""),
                "action": a.get("action", ""),
                "method": a.get("method", "get").lower(),
                "fields": [],
            }
            self.forms.append(self._form)
        if self._form is None:
            return
        fields = self._form["fields"]
        if tag == "input" and "name" in a and "disabled" not in a:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    fields.append((a["name"], a.get("value", "on")))
            elif kind not in ("submit", "button"):
                fields.append((a["name"], a.get("value", "")))
        elif tag == "textarea" and "disabled" not in a:
            self._textarea, self._text = a["name"], []
        elif tag == "select":
            self._select = (a["name"], False)
        elif tag == "option" and self._select is not None and "selected" in a:
            fields.append((self._select[0], a.get("value", "")))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None and self._form is not None:
            text = "".join(self._text)
            # A browser drops the newline right after <textarea>; Django renders one.
            self._form["fields"].append((self._textarea, text.removeprefix("\n")))
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._form = None


def submit_unchanged(client: Any, page: str, pick: Callable[[dict[str, Any]], bool]) -> Any:
    got = client.get(page)
    assert got.status_code == 200, got.content[:500]
    parser = Forms()
    parser.feed(got.content.decode())
    forms = [f for f in parser.forms if pick(f)]
    assert len(forms) == 1, [f["id"] or f["action"] for f in parser.forms]
    form = forms[0]
    data: dict[str, list[str]] = {}
    for name, value in form["fields"]:
        data.setdefault(name, []).append(value)
    posted = client.post(form["action"] or page, data)
    assert posted.status_code in (200, 302), posted.content[:2000]
    if posted.status_code == 200:  # a form shown again has an error on it
        assert b"field-error" not in posted.content and b"errorlist" not in posted.content
    return posted


@pytest.fixture
def admin_client(client):  # type: ignore[no-untyped-def]
    ada = make_user("ada", "admin")
    make_user("abe", "approver")
    make_user("ari", "admin")
    config_apply_text(CONFIG, actor=Actor.human(ada))
    client.force_login(ada)
    return client


def by_id(form_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["id"] == form_id


def by_action(fragment: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f["action"].endswith(fragment)


@pytest.mark.parametrize(
    ("page", "pick"),
    [
        ("/settings/queues/payments/", by_id("queue-form")),
        ("/settings/queues/payments/", by_id("default-form")),
        ("/settings/queues/payments/notify", by_id("notify-form")),
        ("/settings/queues/payments/rules/big-payments/", by_id("rule-form")),
        ("/settings/queues/payments/rules/refunds/", by_id("rule-form")),
        ("/settings/people/", by_action("/settings/people/abe/")),
        ("/settings/people/", by_action("/settings/people/ari/")),
    ],
    ids=["queue", "default", "notify", "rule-approval", "rule-allow", "person", "admin"],
)
def test_finding_saving_a_settings_form_unchanged_changes_nothing(admin_client, page, pick):
    before = config_dumps(config_export())
    assert "approvals" in before and "decide_within_ms" in before  # what used to be lost
    submit_unchanged(admin_client, page, pick)
    assert config_dumps(config_export()) == before


def test_the_people_page_offers_no_form_for_ones_own_roles(admin_client):
    """Nobody changes their own roles (separation of duties): the signed-in admin's own row
    is read-only, so there is no form whose unchanged save would be refused."""
    parser = Forms()
    parser.feed(admin_client.get("/settings/people/").content.decode())
    actions = [f["action"] for f in parser.forms]
    assert any(a.endswith("/settings/people/ari/") for a in actions)
    assert not any(a.endswith("/settings/people/ada/") for a in actions)


def test_a_note_only_edit_of_a_rule_keeps_its_timeout(admin_client):
    page = "/settings/queues/payments/rules/big-payments/"
    parser = Forms()
    parser.feed(admin_client.get(page).content.decode())
    (form,) = [f for f in parser.forms if f["id"] == "rule-form"]
    data = {name: value for name, value in form["fields"]}
    data["note"] = "over 500.00, checked"
    assert admin_client.post(page, data).status_code == 302
    rule = config_export()["queues"]["payments"]["rules"][0]
    assert rule["note"] == "over 500.00, checked"
    assert (rule["decide_within_ms"], rule["on_timeout"]) == (600000, "approve")


def test_the_notify_page_keeps_webhook_secrets_it_never_shows(admin_client):
    from leaseboard.core.models import Queue

    queue = Queue.objects.get(name="payments")
    notify = queue.notify
    notify["webhooks"][0]["secret"] = "whsec_kept"
    notify["approvals"]["webhooks"][0]["secret"] = "whsec_kept_too"
    queue.notify = notify
    queue.save(update_fields=["notify"])
    page = admin_client.get("/settings/queues/payments/notify").content
    assert b"whsec_kept" not in page
    submit_unchanged(admin_client, "/settings/queues/payments/notify", by_id("notify-form"))
    queue.refresh_from_db()
    assert queue.notify["webhooks"][0]["secret"] == "whsec_kept"
    assert queue.notify["approvals"]["webhooks"][0]["secret"] == "whsec_kept_too"
