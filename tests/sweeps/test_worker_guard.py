"""The worker guard: a Celery configuration that could lose or duplicate sweeps and
notifications stops the worker at start-up, naming the setting."""

from __future__ import annotations

from leaseboard.celery import app as celery_app
from leaseboard.sweeps import guard


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


def test_the_worker_guard_refuses_celerys_own_consumer(celery_conf):
    # Celery 5.7.0's consumer exits when Redis is lost while it holds unacked messages
    # (leaseboard/sweeps/consumer.py; tests/faults/test_broker_restart.py shows it).
    celery_conf(worker_consumer="celery.worker.consumer:Consumer")
    problems = guard.worker_config_problems(celery_app)
    assert any("CELERY_WORKER_CONSUMER" in p for p in problems)
