"""Admission of one key into two queues at once: a key names one work item in one queue,
so whichever admit commits first decides the queue, and every other admit of that key into
another queue is answered 409 idempotency_conflict naming the queue the item is in, never
200 with an item silently in the other queue (the queues' row locks do not serialize two
different queues; the key's unique index does)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections, transaction

from leaseboard.core.models import Queue, WorkItem
from leaseboard.core.services.work import work_admit
from leaseboard.domain.errors import IdempotencyConflict
from tests.locking import race_on_a_lock

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_an_admit_that_waited_on_the_other_queues_insert_answers_conflict(agent):
    """Deterministic: an admit of pay-9 into `payments` has inserted but not committed when
    the admit into `default` arrives; the second waits on the key's unique index, then
    finds the key taken. It used to answer 200 with the payments item."""
    Queue.objects.create(name="payments")
    executor, _ = agent()
    answers: dict[str, object] = {}

    def hold(locked: threading.Event, finish: threading.Event) -> None:
        with transaction.atomic():
            payments = Queue.objects.get(name="payments")
            WorkItem.objects.create(
                key="pay-9", queue=payments, admission="admitted", created_at_ms=1
            )
            locked.set()
            finish.wait(10)

    def wait() -> None:
        try:
            answers["default"] = work_admit(key="pay-9", queue_name="default", by=executor)
        except IdempotencyConflict as exc:
            answers["default"] = exc

    race_on_a_lock(hold, wait)
    refused = answers["default"]
    assert isinstance(refused, IdempotencyConflict), refused
    assert refused.extra["queue"] == "payments" and refused.code == "idempotency_conflict"
    assert WorkItem.objects.get(key="pay-9").queue.name == "payments"


def test_thirty_concurrent_admits_of_one_key_into_two_queues_agree_on_one_queue(agent):
    Queue.objects.create(name="payments")
    executor, _ = agent()
    barrier = threading.Barrier(30)
    answers: list[tuple[str, str]] = []
    lock = threading.Lock()

    def admit(queue: str) -> None:
        try:
            barrier.wait()
            item, created = work_admit(key="race-key", queue_name=queue, by=executor)
            answer = ("201" if created else "200", item.queue.name)
        except IdempotencyConflict as exc:
            answer = ("409", str(exc.extra["queue"]))
        except Exception as exc:  # surfaced in the assertion below
            answer = ("error", repr(exc))
        finally:
            connections.close_all()
        with lock:
            answers.append((queue, *answer))  # type: ignore[arg-type]

    threads = [
        threading.Thread(target=admit, args=("payments" if i % 2 else "default",))
        for i in range(30)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    home = WorkItem.objects.get(key="race-key").queue.name
    statuses = Counter(status for _, status, _ in answers)
    assert statuses["201"] == 1 and statuses["error"] == 0, answers
    for asked, status, said in answers:
        # Every answer names the queue the item is in; only admits into it succeed.
        assert said == home, answers
        assert (status in {"201", "200"}) == (asked == home), answers
    assert WorkItem.objects.filter(key="race-key").count() == 1
