"""Approvers reached where they are: an effect that waits for approval is sent, from the
outbox its proposal's transaction wrote, by e-mail (Django's outbox) and by a signed,
Slack-compatible webhook to a local HTTP receiver that fails once with a 500 and is
retried; a reminder goes out before the deadline, once; every attempt is recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone

from leaseboard.core.models import Effect, Queue
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services.queues import notify_checked
from leaseboard.sweeps.approver_notices import approval_notices_deliver_due
from leaseboard.sweeps.models import ApprovalNotice
from leaseboard.sweeps.notifications import SIGNATURE_HEADER, verify
from leaseboard.sweeps.services import sweep_run
from tests.builders import age_approval, effect_rules, effect_under, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SECRET = "whsec_test_approvals"


class Receiver:
    """A local chat tool's incoming webhook: answers `statuses` in turn (then 200)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.calls: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.calls.append((dict(self.headers), body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/approvals"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver([500])
    yield r
    r.server.shutdown()


def configure(queue: Queue, approvals: dict[str, Any]) -> None:
    queue.notify = notify_checked({"approvals": approvals}, current={})
    queue.save(update_fields=["notify"])


def ask(scene, key: str = "refund-1") -> Effect:  # type: ignore[no-untyped-def]
    return effect_under(
        scene.lease, scene.agent, key, payload={"amount": "100.00", "currency": "EUR"}
    )


def test_a_request_is_emailed_and_sent_to_a_signed_webhook_retried_after_a_500(
    scene, receiver, settings
):
    settings.LEASEBOARD_PUBLIC_URL = "https://leaseboard.example.com"
    queue = scene.lease.work_item.queue
    effect_rules(
        queue,
        RuleSpec(
            name="refunds",
            kind="payment.*",
            decision="require_approval",
            decide_within_ms=30 * 60_000,
        ),
    )
    user = make_user("abe-mail", "approver")
    user.email = "abe@example.com"
    user.save(update_fields=["email"])
    configure(
        queue,
        {
            "approvers": ["abe-mail"],
            "emails": ["finance@example.com"],
            "webhooks": [{"url": receiver.url, "secret": SECRET}],
        },
    )
    effect = ask(scene)
    assert effect.decision == "pending_approval"
    # Written in the proposal's own transaction: the outbox.
    rows = ApprovalNotice.objects.filter(effect=effect, kind="request")
    assert sorted(rows.values_list("channel", "target")) == [
        ("email", "abe@example.com"),
        ("email", "finance@example.com"),
        ("webhook", receiver.url),
    ]

    approval_notices_deliver_due()
    assert sorted(m.to[0] for m in mail.outbox) == ["abe@example.com", "finance@example.com"]
    message = mail.outbox[0]
    link = f"https://leaseboard.example.com/takeovers/effects/{effect.id}"
    assert message.subject == "[leaseboard] approval asked in default (refunds)"
    assert 'Kind:      "payment.refund"' in message.body
    assert 'Target:    "order-7"' in message.body
    assert link in message.body and effect.content_digest in message.body
    assert '"amount": "100.00"' in message.body

    hook = rows.get(channel="webhook")
    assert (hook.status, hook.attempts, hook.last_status_code) == ("pending", 1, 500)
    assert hook.due_at > timezone.now() - timedelta(seconds=1)
    approval_notices_deliver_due()  # not due yet: the backoff holds it
    assert len(receiver.calls) == 1
    ApprovalNotice.objects.filter(id=hook.id).update(due_at=timezone.now() - timedelta(seconds=1))
    approval_notices_deliver_due()
    hook.refresh_from_db()
    assert (hook.status, hook.attempts, hook.last_status_code) == ("delivered", 2, 200)
    assert len(receiver.calls) == 2

    headers, body = receiver.calls[-1]
    assert verify(body, headers[SIGNATURE_HEADER], SECRET)
    assert not verify(body, headers[SIGNATURE_HEADER], "another secret")
    sent = json.loads(body)
    assert set(sent) == {"text", "blocks"}  # what a Slack incoming webhook accepts
    # The agent's words only where Slack parses nothing (plain_text); our link in `text`.
    assert link in sent["text"] and "payment.refund" not in sent["text"]
    assert {b["type"] for b in sent["blocks"]} == {"section", "context", "actions"}
    button = sent["blocks"][-1]["elements"][0]
    assert button["type"] == "button" and button["url"] == link
    asked, payload = sent["blocks"][1]["text"], sent["blocks"][2]["text"]
    assert asked["type"] == payload["type"] == "plain_text"
    assert "payment.refund on order-7" in asked["text"]
    assert payload["text"] == 'payload: {"amount": "100.00", "currency": "EUR"}'
    assert len(mail.outbox) == 2  # e-mails are sent once, whatever the webhook does


def test_a_reminder_goes_out_once_before_the_deadline_to_the_rules_own_approvers(scene, settings):
    settings.LEASEBOARD_APPROVAL_REMIND_BEFORE_MS = 5 * 60_000
    queue = scene.lease.work_item.queue
    effect_rules(
        queue,
        RuleSpec(
            name="refunds", kind="payment.*", decision="require_approval", decide_within_ms=3600_000
        ),
    )
    finance = make_user("fay-fin", "approver")
    finance.email = "fay@example.com"
    finance.save(update_fields=["email"])
    from django.contrib.auth.models import Group

    finance.groups.add(Group.objects.get_or_create(name="finance")[0])
    configure(
        queue,
        {
            "emails": ["everyone@example.com"],
            "rules": {"refunds": {"approvers": ["group:finance"]}},
        },
    )
    effect = ask(scene)
    assert list(ApprovalNotice.objects.values_list("kind", "target")) == [
        ("request", "fay@example.com")
    ]
    assert sweep_run().steps["approval_reminders"] == 0  # an hour left: too early
    age_approval(effect.id, 3600_000 - 4 * 60_000)  # four minutes left
    assert sweep_run().steps["approval_reminders"] == 1
    assert sweep_run().steps["approval_reminders"] == 0  # once
    approval_notices_deliver_due()
    subjects = sorted(m.subject for m in mail.outbox)
    assert subjects == [
        "[leaseboard] Reminder: approval asked in default (refunds)",
        "[leaseboard] approval asked in default (refunds)",
    ]
    reminder = next(m for m in mail.outbox if "Reminder" in m.subject)
    assert reminder.to == ["fay@example.com"]  # the rule's group, not the queue's address
    assert "rejected by default" in reminder.body


def test_a_notice_for_an_effect_decided_meanwhile_is_not_sent(scene, people):
    from leaseboard.core.authority import Actor
    from leaseboard.core.services.approvals import effect_approve

    effect_rules(scene.lease.work_item.queue, ("payment.*", "require_approval"))
    people.approver.email = "abe@example.com"
    people.approver.save(update_fields=["email"])
    effect = ask(scene)
    effect_approve(effect_id=effect.id, actor=Actor.human(people.approver))
    approval_notices_deliver_due()
    assert mail.outbox == []
    notice = ApprovalNotice.objects.get(effect=effect)
    assert (notice.status, notice.last_error) == ("failed", "decided before it was sent")
