"""Sweep services on real PostgreSQL: transitions, alerts, injected races, outage recovery,
retention, the worker guard, notifications and metrics. Time moves by aging stored times."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from leaseboard.celery import app as celery_app
from leaseboard.core.models import Alert, Executor, Lease, LeaseEvent, Queue
from leaseboard.core.services import leases as ls
from leaseboard.core.services.alerts import lease_alert
from leaseboard.core.services.work import work_admit
from leaseboard.sweeps import guard, notifications, services, tasks
from leaseboard.sweeps.models import NotificationDelivery
from tests.sweeps_fixtures import age_leases, age_sweep_clock, bulk_leases

pytestmark = pytest.mark.postgres


def grant(key: str, executor: Executor, **timing: int) -> Lease:
    work_admit(key=key, timing=timing or None)
    return ls.lease_acquire(work_key=key, executor=executor).lease


def alerts(kind: str) -> list[Alert]:
    return list(Alert.objects.filter(kind=kind))


@pytest.mark.django_db
def test_an_agent_that_stops_renewing_goes_to_jeopardy_then_expired_with_one_alert_each(agent):
    executor, _ = agent()
    lease = grant("stop-1", executor)
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "active"

    age_leases(lease.jeopardy_after_ms + 100, lease_ids=[lease.id])
    first = services.sweep_run()
    again = services.sweep_run()
    lease.refresh_from_db()
    assert (first.jeopardy, again.jeopardy) == (1, 0)
    assert lease.state == "jeopardy" and lease.due_at_ms == lease.expires_at_ms
    (jeopardy,) = alerts("jeopardy")
    assert jeopardy.dedupe_key == f"jeopardy:{lease.id}:{lease.epoch}"
    assert jeopardy.due_at_ms == lease.jeopardy_at_ms

    age_leases(lease.ttl_ms, lease_ids=[lease.id])
    assert services.sweep_run().expired == 1
    assert services.sweep_run().expired == 0
    lease.refresh_from_db()
    assert lease.state == "expired" and lease.end_reason == "ttl elapsed"
    (expired,) = alerts("expired")
    assert expired.epoch == lease.epoch and expired.due_at_ms == lease.expires_at_ms
    jeopardy.refresh_from_db()
    assert jeopardy.resolved_at_ms is not None  # superseded by the expiry alert
    kinds = list(LeaseEvent.objects.filter(lease=lease).values_list("kind", flat=True))
    assert sorted(kinds) == ["expired", "granted", "jeopardy"]


@pytest.mark.django_db
def test_a_renew_after_jeopardy_brings_the_lease_back_and_resolves_the_alert(agent):
    executor, _ = agent()
    lease = grant("back-1", executor)
    age_leases(lease.jeopardy_after_ms + 100, lease_ids=[lease.id])
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "jeopardy"
    ls.lease_renew(lease_id=lease.id, executor=executor, epoch=lease.epoch)
    lease.refresh_from_db()
    assert lease.state == "active"
    assert Alert.objects.get(kind="jeopardy").resolved_at_ms is not None
    assert services.sweep_run().jeopardy == 0


@pytest.mark.django_db
def test_a_lease_that_passed_expiry_unswept_expires_directly_with_one_alert(agent):
    executor, _ = agent()
    lease = grant("late-1", executor)
    age_leases(lease.ttl_ms + 5000, lease_ids=[lease.id])
    report = services.sweep_run()
    assert (report.jeopardy, report.expired) == (0, 1)
    assert [a.kind for a in Alert.objects.all()] == ["expired"]


@pytest.mark.django_db
def test_human_standing_that_lapses_raises_standing_lapsed(agent):
    user = get_user_model().objects.create_user("olga")
    human = Executor.objects.create(name="human:olga", kind="human", user=user)
    lease = grant("human-1", human)
    age_leases(lease.ttl_ms + 1, lease_ids=[lease.id])
    services.sweep_run()
    assert Lease.objects.get(id=lease.id).state == "expired"
    assert [a.kind for a in Alert.objects.all()] == ["standing_lapsed"]


@pytest.mark.django_db
def test_a_lease_renewed_between_the_sweeps_read_and_write_is_left_alone(agent):
    executor, _ = agent()
    renewed = grant("race-renew", executor)
    released = grant("race-release", executor)
    revoked = grant("race-revoke", executor)
    untouched = grant("race-none", executor)
    ids = [renewed.id, released.id, revoked.id, untouched.id]
    age_leases(renewed.jeopardy_after_ms + 100, lease_ids=ids)
    calls = []

    def race(claimed: list[Lease]) -> None:
        # Runs inside the batch transaction, after the claim, before the write.
        calls.append(sorted(str(lease.id) for lease in claimed))
        ls._renew_fast([(renewed.id, renewed.epoch)], executor.id)
        for target, state in ((released, "released"), (revoked, "revoked")):
            fresh = Lease.objects.get(id=target.id)
            ls.lease_end_locked(lease=fresh, state=state, now_ms=fresh.renewed_at_ms, reason="x")

    report = services.sweep_run(before_write=race)
    assert len(calls) == 1 and len(calls[0]) == 4
    assert (report.jeopardy, report.skipped) == (1, 3)
    states = dict(Lease.objects.filter(id__in=ids).values_list("id", "state"))
    assert states == {
        renewed.id: "active",
        released.id: "released",
        revoked.id: "revoked",
        untouched.id: "jeopardy",
    }
    assert list(Alert.objects.values_list("lease_id", flat=True)) == [untouched.id]
    assert not LeaseEvent.objects.filter(lease_id=renewed.id, kind="jeopardy").exists()


@pytest.mark.django_db
def test_an_outage_of_two_ttls_gives_a_recovery_grace_and_one_summary_alert(agent, db_clock):
    executor, _ = agent()
    bulk_leases(200, prefix="outage-", holder=executor, jeopardy_in_ms=10_000, expires_in_ms=15_000)
    healthy = grant("outage-healthy", executor)
    services.sweep_run()  # the last sweep before the outage
    ttl = 15_000
    # Two ttls pass with no renewals and no sweeps; the healthy one renews just before.
    silent = list(Lease.objects.exclude(id=healthy.id).values_list("id", flat=True))
    age_leases(2 * ttl + 1000, lease_ids=silent)
    age_sweep_clock(2 * ttl + 1000)
    ls.lease_renew(lease_id=healthy.id, executor=executor, epoch=healthy.epoch)

    report = services.sweep_run()
    assert report.expired == 0
    assert report.recovered == 200
    assert report.recovery_alert_id is not None
    (summary,) = Alert.objects.all()
    assert summary.kind == "recovery" and summary.detail["leases"] == 200
    assert Lease.objects.filter(state="jeopardy").count() == 200
    assert Lease.objects.filter(state="expired").count() == 0
    assert Lease.objects.get(id=healthy.id).state == "active"
    assert services.sweep_run().recovered == 0  # a second sweep finds nothing more

    # The grace is real: a holder that renews now keeps its lease...
    one = Lease.objects.filter(state="jeopardy").first()
    ls.lease_renew(lease_id=one.id, executor=executor, epoch=one.epoch)
    assert Lease.objects.get(id=one.id).state == "active"
    # ...and those that still do not renew expire normally, one alert each.
    # (Time moves forward through the clock seam: aging rows would move them back into
    # the outage window.) The renewed lease renews again; the others stay silent.
    db_clock.advance(ttl // 2)
    services.sweep_run()
    ls.lease_renew(lease_id=one.id, executor=executor, epoch=one.epoch)
    ls.lease_renew(lease_id=healthy.id, executor=executor, epoch=healthy.epoch)
    db_clock.advance(ttl // 2 + 1)
    report = services.sweep_run()
    assert (report.expired, report.recovered) == (199, 0)
    assert Alert.objects.filter(kind="expired").count() == 199
    assert Alert.objects.filter(kind="recovery").count() == 1


@pytest.mark.django_db
def test_a_short_gap_between_sweeps_is_not_an_outage(agent):
    executor, _ = agent()
    bulk_leases(20, prefix="gap-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    services.sweep_run()  # first sweep ever: nothing to compare with
    age_sweep_clock(1000)
    bulk_leases(5, prefix="gap2-", holder=executor, jeopardy_in_ms=-10, expires_in_ms=-5)
    report = services.sweep_run()
    assert report.recovered == 0 and report.expired == 5
    assert not Alert.objects.filter(kind="recovery").exists()


@pytest.mark.django_db
def test_the_takeover_step_runs_after_the_lease_batches_with_the_sweeps_batch_size(
    monkeypatch, agent
):
    executor, _ = agent()
    lease = grant("step-1", executor)
    seen = []

    def expire_takeover_requests(*, batch_size: int) -> int:
        # The lease batches have committed by the time the step runs.
        seen.append((batch_size, Lease.objects.get(id=lease.id).state))
        return 3

    monkeypatch.setattr(services, "takeover_sweep_step", expire_takeover_requests)
    age_leases(lease.ttl_ms + 100, lease_ids=[lease.id])
    report = services.sweep_run(batch_size=7)
    assert seen == [(7, "expired")]
    assert report.steps == {"takeovers": 3}


@pytest.mark.django_db
def test_a_failing_takeover_step_does_not_stop_lease_expiry(monkeypatch, agent):
    executor, _ = agent()
    lease = grant("step-2", executor)

    def broken(*, batch_size: int) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(services, "takeover_sweep_step", broken)
    age_leases(lease.ttl_ms + 100, lease_ids=[lease.id])
    report = services.sweep_run()
    assert report.expired == 1 and report.steps == {}
    assert Lease.objects.get(id=lease.id).state == "expired"


@pytest.mark.django_db
def test_retention_prunes_lease_events_past_the_configured_age(agent):
    executor, _ = agent()
    lease = grant("ret-1", executor)
    LeaseEvent.objects.filter(lease=lease).update(at_ms=1_000)  # 1970: far past any age
    LeaseEvent.objects.create(
        lease=lease, work_item_id=lease.work_item_id, epoch=1, kind="extended", at_ms=10**13
    )
    assert services.lease_events_prune(older_than_days=30, batch_size=1) == 1
    assert list(LeaseEvent.objects.values_list("kind", flat=True)) == ["extended"]
    lease.refresh_from_db()
    assert lease.renew_count == 0  # aggregates live on the lease row, untouched


@pytest.fixture
def celery_conf():
    """Override Celery settings for one test: celery_conf(key=value, ...)."""
    saved: dict = {}

    def override(**values):  # type: ignore[no-untyped-def]
        for key, value in values.items():
            saved.setdefault(key, celery_app.conf[key])
            celery_app.conf[key] = value

    yield override
    for key, value in saved.items():
        celery_app.conf[key] = value


def test_the_worker_guard_accepts_the_shipped_settings():
    assert guard.worker_config_problems(celery_app) == []


def test_the_worker_guard_names_a_visibility_timeout_at_or_below_a_time_limit(celery_conf):
    celery_conf(
        broker_url="redis://127.0.0.1:6379/0",
        broker_transport_options={"visibility_timeout": 60},
        task_time_limit=60,
    )
    problems = guard.worker_config_problems(celery_app)
    assert problems and all("visibility_timeout" in p for p in problems)


def test_the_worker_guard_refuses_reject_on_worker_lost_with_late_acks(monkeypatch):
    task = celery_app.tasks["leaseboard.sweeps.tasks.deliver_email"]
    monkeypatch.setattr(task, "reject_on_worker_lost", True)
    problems = guard.worker_config_problems(celery_app)
    assert any("CELERY_TASK_REJECT_ON_WORKER_LOST" in p for p in problems)


def test_the_worker_guard_refuses_a_notification_task_that_acks_early(monkeypatch):
    task = celery_app.tasks["leaseboard.sweeps.tasks.deliver_webhook"]
    monkeypatch.setattr(task, "acks_late", False)
    problems = guard.worker_config_problems(celery_app)
    assert any(
        "acks_late is off for leaseboard.sweeps.tasks.deliver_webhook" in p for p in problems
    )


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
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Hook
    server.shutdown()


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
    lease = grant("notify-1", executor)
    age_leases(lease.jeopardy_after_ms + 1, lease_ids=[lease.id])
    services.sweep_run()  # enqueues notify_alert on commit (eager here)

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
def test_a_webhook_that_keeps_refusing_is_logged_as_failed(agent, webhook_server, settings):
    url, hook = webhook_server
    hook.statuses = [410]
    Queue.objects.filter(name="default").update(notify={"webhooks": [{"url": url}]})
    executor, _ = agent()
    lease = grant("notify-2", executor)
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
    delivery = NotificationDelivery.objects.create(alert_id=alert_id, channel="webhook", target=url)
    assert notifications.webhook_deliver(delivery_id=delivery.id) is None  # 4xx: no retry
    delivery.refresh_from_db()
    assert (delivery.status, delivery.last_error) == ("failed", "HTTP 410")


@pytest.mark.django_db
def test_alerts_open_skips_an_existing_dedupe_key_and_returns_only_new_ids(agent):
    executor, _ = agent()
    lease = Lease.objects.select_related("holder").get(id=grant("dup-1", executor).id)
    make = lambda: lease_alert(lease, "expired", "m", due_at_ms=1, now_ms=2)  # noqa: E731
    first = services.alerts_open([make()])
    assert len(first) == 1
    assert services.alerts_open([make(), make()]) == []
    assert Alert.objects.count() == 1


@pytest.mark.django_db
def test_metrics_report_certainty_sweeps_alerts_and_latency(agent, client):
    executor, _ = agent()
    bulk_leases(3, prefix="m-", holder=executor, jeopardy_in_ms=-500, expires_in_ms=10_000)
    bulk_leases(2, prefix="n-", holder=executor, jeopardy_in_ms=5_000, expires_in_ms=10_000)
    services.sweep_run()
    text = client.get("/metrics").content.decode()
    assert 'leaseboard_leases{certainty="jeopardy"} 3.0' in text
    assert 'leaseboard_leases{certainty="active"} 2.0' in text
    assert 'leaseboard_alerts_opened_total{kind="jeopardy"} 3.0' in text
    assert "leaseboard_sweeps_total 1.0" in text
    assert 'leaseboard_alert_latency_seconds_bucket{le="1.0"} 3.0' in text
    assert "leaseboard_sweep_duration_seconds_count 1.0" in text
    assert "leaseboard_live_lease_renewals 5.0" in text
    assert "leaseboard_refusals_total" in text or "leaseboard_refusals" in text


@pytest.mark.django_db
def test_healthz_reports_the_broker(client):
    body = client.get("/healthz").json()
    assert "broker" in body["checks"]
    assert body["checks"]["broker"]["ok"] is True
