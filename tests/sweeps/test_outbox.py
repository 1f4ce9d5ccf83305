"""The alerts' outbox and the wake-ups on real PostgreSQL (docs/design.md §14): an alert's delivery
rows are written in the transaction that opened it (a rollback leaves none); drains claim
due rows once; a failed attempt waits on its row; a wake-up that cannot reach the broker
(a real Celery app on a port nothing listens on) is counted and never raised."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from celery import Celery
from django.db import transaction
from django.utils import timezone

from leaseboard.core.models import Lease, Queue
from leaseboard.core.services.alerts import lease_alert
from leaseboard.sweeps import outbox, services, tasks
from leaseboard.sweeps.models import MetricCounter, NotificationDelivery
from leaseboard.sweeps.wakeups import Wakeups
from tests.builders import leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture
def notifying(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_WEBHOOK_SECRET = "a-webhook-secret-of-its-own"
    Queue.objects.filter(name="default").update(
        notify={"webhooks": [{"url": HOOK}], "emails": ["ops@example.com"]}
    )


def _open_alert(executor, key: str) -> int:  # type: ignore[no-untyped-def]
    lease = Lease.objects.select_related("holder").get(id=leased_item(executor, key).id)
    return services.alerts_open([lease_alert(lease, "jeopardy", "m", due_at_ms=0, now_ms=0)])[0]


def test_an_alerts_deliveries_are_written_with_it_and_a_rollback_leaves_none(agent, notifying):
    executor, _ = agent()
    with pytest.raises(RuntimeError), transaction.atomic():
        _open_alert(executor, "rolled-back")
        assert NotificationDelivery.objects.count() == 2  # in the alert's own transaction
        raise RuntimeError("the opening transaction fails")
    assert NotificationDelivery.objects.count() == 0
    alert_id = _open_alert(executor, "kept")
    rows = set(NotificationDelivery.objects.values_list("alert_id", "channel", "target", "status"))
    assert rows == {
        (alert_id, "webhook", HOOK, "pending"),
        (alert_id, "email", "ops@example.com", "pending"),
    }


def test_a_queue_that_notifies_nobody_costs_no_row(agent):
    executor, _ = agent()
    _open_alert(executor, "quiet")
    assert NotificationDelivery.objects.count() == 0


def test_drains_claim_each_due_delivery_once_and_a_failure_waits_on_its_row(agent, notifying):
    executor, _ = agent()
    _open_alert(executor, "claimed")
    claimed = outbox.alert_deliveries_claim_due()
    assert sorted(c for _, c in claimed) == ["email", "webhook"]
    assert outbox.alert_deliveries_claim_due() == []  # a second drain finds them taken
    assert not outbox.alert_deliveries_due_exist()
    webhook = NotificationDelivery.objects.get(channel="webhook")
    # A lost dispatch (its message gone with the broker) is due again after the claim.
    assert webhook.due_at > timezone.now() + timedelta(seconds=outbox.dispatch_claim_s() - 5)
    NotificationDelivery.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    assert len(outbox.alert_deliveries_claim_due()) == 2
    # An attempt that failed (nothing listens on port 9) is tried again after its backoff.
    assert tasks.deliver_webhook(webhook.id) == "retry"
    webhook.refresh_from_db()
    assert webhook.status == "pending" and webhook.attempts == 1 and webhook.last_error
    assert webhook.due_at > timezone.now() - timedelta(seconds=1)


def test_the_sweep_drains_what_is_due(agent, notifying, celery_conf, mailoutbox):  # type: ignore[no-untyped-def]
    celery_conf(task_always_eager=True)
    executor, _ = agent()
    _open_alert(executor, "late")  # a wake-up that never came (this test never commits)
    NotificationDelivery.objects.update(due_at=timezone.now() - timedelta(seconds=1))
    NotificationDelivery.objects.filter(channel="webhook").update(status="failed")
    tasks.sweep()  # the safety net: the e-mail row is due, the sweep's drain sends it
    assert NotificationDelivery.objects.get(channel="email").status == "delivered"
    assert len(mailoutbox) == 1


def _nothing() -> None:
    pass


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens


def test_a_wake_up_with_the_broker_unreachable_is_counted_and_never_raised(settings):
    settings.LEASEBOARD_WAKEUP_RETRY_AFTER_S = 60
    # Not the current app: the shared tasks of later tests must keep resolving to ours.
    app = Celery(
        "unreachable", broker=f"redis://127.0.0.1:{_closed_port()}/0", set_as_current=False
    )
    app.conf.broker_connection_retry_on_startup = False
    drain = app.task(name="leaseboard.tests.drain")(_nothing)
    wakeups = Wakeups()
    wakeups.wake(drain)  # returns at once; the publish happens on the process's thread
    assert wakeups.flush(30)
    assert wakeups.failed["leaseboard.tests.drain"] == 1 and not wakeups.sent
    counted = MetricCounter.objects.get(name="wakeups_failed_total", label=drain.name)
    assert counted.value == 1
    wakeups.wake(drain)  # within the retry interval: skipped, not tried again
    assert wakeups.flush(30)
    assert wakeups.skipped[drain.name] == 1 and wakeups.failed[drain.name] == 1


@pytest.mark.redis
def test_wake_ups_of_one_task_coalesce_and_are_deferred_not_dropped(redis_url):  # type: ignore[no-untyped-def]
    import time
    import uuid

    import redis

    queue = f"lb-test-wakeups-{uuid.uuid4().hex[:8]}"
    app = Celery("spacing", broker=redis_url, set_as_current=False)
    app.conf.task_default_queue = queue
    drain = app.task(name="leaseboard.tests.spaced")(_nothing)
    client = redis.Redis.from_url(redis_url)
    wakeups = Wakeups()
    try:
        # 200 wake-ups over about a second, spaced at least 0.5 s: two or three messages.
        for _ in range(200):
            wakeups.wake(drain, min_interval_s=0.5)
            time.sleep(0.005)
        last_asked = time.monotonic()
        assert wakeups.flush(10)
        published = client.llen(queue)
        assert 2 <= published <= 4 and wakeups.sent[drain.name] == published
        # The last wake-up, inside an interval, was deferred to its end, not dropped.
        assert wakeups._last[drain.name] >= last_asked - 0.01
    finally:
        client.delete(queue)
