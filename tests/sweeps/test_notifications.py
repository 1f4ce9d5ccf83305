"""Alert notifications on real PostgreSQL: signed webhooks with retries, e-mail, and a
delivery log that records failures."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core import mail

from leaseboard.core.models import Alert, Lease, Queue
from leaseboard.core.services.alerts import lease_alert
from leaseboard.sweeps import notifications, services, tasks
from leaseboard.sweeps.models import NotificationDelivery
from tests.builders import age_leases, leased_item
from tests.serving import served

pytestmark = pytest.mark.postgres


class _Hook(BaseHTTPRequestHandler):
    received: list = []
    statuses: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), body))
        self.send_response(self.statuses.pop(0) if self.statuses else 200)
        self.end_headers()

    def log_message(self, *args):  # keep test output quiet
        pass


@pytest.fixture
def webhook_server():
    _Hook.received, _Hook.statuses = [], []
    with served(HTTPServer(("127.0.0.1", 0), _Hook)) as base:
        yield f"{base}/hook", _Hook


@pytest.mark.django_db(transaction=True)
def test_alerts_notify_a_signed_webhook_with_retries_and_an_email(
    agent, webhook_server, monkeypatch, celery_conf
):
    url, hook = webhook_server
    hook.statuses = [503]  # first attempt fails, the retry succeeds
    Queue.objects.filter(name="default").update(
        notify={"webhooks": [{"url": url, "secret": "s3cret"}], "emails": ["ops@example.com"]}
    )
    celery_conf(task_always_eager=True)
    monkeypatch.setattr(notifications, "backoff_s", lambda attempt: 0)
    executor, _ = agent()
    lease = leased_item(executor, "notify-1")
    age_leases(lease.jeopardy_after_ms + 1, lease_ids=[lease.id])
    services.sweep_run()  # the alert's delivery rows commit with it; the drain runs (eager)
    assert len(hook.received) == 1  # refused: the backoff (0 s here) is on the row
    tasks.deliver_notifications()  # the next drain (the sweep starts one) sends it again

    alert = Alert.objects.get(kind="jeopardy")
    assert len(hook.received) == 2
    headers, body = hook.received[-1]
    assert notifications.verify(body, headers["X-Leaseboard-Signature"], "s3cret")
    assert not notifications.verify(body, headers["X-Leaseboard-Signature"], "wrong")
    assert json.loads(body)["kind"] == "jeopardy" and json.loads(body)["id"] == alert.id
    webhook = NotificationDelivery.objects.get(alert=alert, channel="webhook")
    assert (webhook.status, webhook.attempts, webhook.last_status_code) == ("delivered", 2, 200)
    email = NotificationDelivery.objects.get(alert=alert, channel="email")
    assert email.status == "delivered"
    assert len(mail.outbox) == 1 and "jeopardy" in mail.outbox[0].subject
    # A redelivered fan-out sends nothing twice.
    assert tasks.notify_alert(alert.id) == 0
    assert len(hook.received) == 2 and len(mail.outbox) == 1


@pytest.mark.django_db
def test_a_webhook_that_keeps_refusing_is_logged_as_a_dead_letter(agent, webhook_server, settings):
    url, hook = webhook_server
    hook.statuses = [410]
    settings.LEASEBOARD_WEBHOOK_SECRET = "a-webhook-secret-of-its-own"  # the hook names none
    Queue.objects.filter(name="default").update(notify={"webhooks": [{"url": url}]})
    executor, _ = agent()
    lease = leased_item(executor, "notify-2")
    alert_id = services.alerts_open(
        [
            lease_alert(
                Lease.objects.select_related("holder").get(id=lease.id),
                "jeopardy",
                "m",
                due_at_ms=0,
                now_ms=0,
            )
        ]
    )[0]
    # Opened with the alert, in its transaction (the outbox).
    delivery = NotificationDelivery.objects.get(alert_id=alert_id, channel="webhook", target=url)
    assert notifications.webhook_deliver(delivery_id=delivery.id) is None  # 4xx: no retry
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("dead", "HTTP 410")
