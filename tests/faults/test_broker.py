"""Redis killed and the worker killed, under a real gunicorn and a real Celery worker with
beat, each on servers of the module's own (docs/design.md §14):

- the worker survives `kill -9` of Redis while it holds unacknowledged messages and its
  sweeps resume once Redis is back (celery 5.7.0's own consumer exits there:
  leaseboard/sweeps/consumer.py);
- with Redis down an acquire with a recipient's webhook registered answers 201, and the
  epoch notice it owes is delivered once Redis returns (it waited in the outbox);
- with the worker dead, /healthz reports the sweeps `stale` (still 200: the web node
  serves) and every dashboard page shows the banner.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest

from bench.common import signal_group
from tests.faults.stack import Stack
from tests.waiting import wait_until

# django_db: pytest-django then migrates the test database, whose schema the stack copies.
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db]


def wait_for(what: str, ready, timeout: float = 30, stack: Stack | None = None):  # type: ignore[no-untyped-def]
    logs = (lambda: stack.log("worker")[-3000:]) if stack else (lambda: "")
    return wait_until(ready, what=what, timeout_s=timeout, interval_s=0.1, detail=logs)


def wait_for_s(what: str, ready, timeout: float, stack: Stack) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    wait_for(what, ready, timeout, stack)
    return time.monotonic() - started


def sweeps_completing_after(stack: Stack, after_ms: int) -> bool:
    last = stack.last_sweep_completed_ms()
    return last is not None and last > after_ms


@pytest.fixture(scope="module")
def worker(broker_stack: Stack) -> Iterator[Stack]:
    broker_stack.start_worker()
    start = broker_stack.db_now_ms()
    wait_for(
        "a first sweep", lambda: sweeps_completing_after(broker_stack, start), 60, broker_stack
    )
    yield broker_stack


class _Notices(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def notices() -> Iterator[tuple[str, list[dict]]]:
    _Notices.received = []
    server = HTTPServer(("127.0.0.1", 0), _Notices)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/epochs", _Notices.received
    server.shutdown()


def test_the_worker_survives_redis_killed_with_unacked_messages_and_sweeps_resume(
    worker: Stack,
) -> None:
    redis = worker.redis
    assert redis is not None
    # Messages the worker holds unacknowledged: tasks due in ten minutes (what a webhook
    # retried with a countdown used to be), reserved by the worker at once.
    worker.run_django(
        "from leaseboard.sweeps.tasks import deliver_email\n"
        "for _ in range(6):\n"
        "    deliver_email.apply_async((0,), countdown=600)\n"
    )
    wait_for("6 unacked messages", lambda: redis.redis_cli("HLEN", "unacked") == "6", 30, worker)
    redis.kill9()
    wait_for(  # the worker notices, fails to reconnect a few times
        "the worker failing to reconnect twice",
        lambda: worker.log("worker", tail=None).count("Cannot connect to") >= 2,
        30,
        worker,
    )
    redis.start()
    back_ms = worker.db_now_ms()
    took = wait_for_s(
        "a sweep after Redis returned", lambda: sweeps_completing_after(worker, back_ms), 60, worker
    )
    # Reconnection tries are at most 2 s apart (kombu's own grow to 30 s): generous bound.
    assert took < 20, took
    proc = worker.procs["worker"]
    assert proc.poll() is None, worker.log("worker")
    log = worker.log("worker", tail=None)
    assert "Restoring 6 unacknowledged message(s)" in log  # the case that crashed 5.7.0's
    assert "Unrecoverable error" not in log, log


def test_with_redis_down_an_acquire_answers_201_and_its_notice_is_delivered_after(
    worker: Stack, notices: tuple[str, list[dict]]
) -> None:
    url, received = notices
    worker.run_django(
        "from leaseboard.core.services.recipients import recipient_create, recipient_webhook_set\n"
        "recipient_create(name='ledger')\n"
        f"recipient_webhook_set(name='ledger', url={url!r})\n"
    )
    api = worker.api()
    assert api.post("/api/v1/work-items", json={"key": "during-outage"}).status_code == 201
    redis = worker.redis
    assert redis is not None
    redis.kill9()
    try:
        started = time.monotonic()
        grant = api.post("/api/v1/work-items/during-outage/lease", json={})
        took = time.monotonic() - started
        assert grant.status_code == 201, grant.text[:500]
        assert took < 2.0, took  # the broker is not on the request's path at all
        epoch = grant.json()["epoch"]
        status = worker.db(
            "SELECT n.status FROM core_epochnotice n JOIN core_workitem w "
            "ON w.id = n.work_item_id WHERE w.key = 'during-outage'"
        )
        assert status == ("pending",)  # committed with the grant, waiting for a worker
        time.sleep(2)
        assert received == []  # nothing could be sent while the broker was down
    finally:
        redis.start()
    wait_for("the notice delivered", lambda: received, 60, worker)
    sent = [n for batch in received for n in batch["notices"]]
    assert {"work_key": "during-outage", "epoch": epoch} in [
        {"work_key": n["work_key"], "epoch": n["epoch"]} for n in sent
    ]
    # ...and logged on its row once the POST returned.
    wait_for(
        "the notice logged as delivered",
        lambda: (
            worker.db(
                "SELECT n.status FROM core_epochnotice n JOIN core_workitem w "
                "ON w.id = n.work_item_id WHERE w.key = 'during-outage'"
            )
            == ("delivered",)
        ),
        30,
        worker,
    )


def test_with_the_worker_killed_healthz_says_stale_and_every_page_shows_the_banner(
    worker: Stack,
) -> None:
    web = worker.web
    assert web is not None
    fresh = httpx.get(f"{web.url}/healthz", timeout=10).json()
    assert fresh["checks"]["sweeps"]["stale"] is False, fresh
    signal_group(worker.procs["worker"], signal.SIGKILL)
    worker.procs["worker"].wait(10)
    killed = time.monotonic()

    def stale() -> dict | None:
        answer = httpx.get(f"{web.url}/healthz", timeout=10)
        body = answer.json()
        return (answer.status_code, body) if body["checks"]["sweeps"]["stale"] else None

    status, body = wait_for("/healthz to say stale", stale, 30, worker)
    took = time.monotonic() - killed
    assert status == 200 and body["serving"] is True and body["ok"] is False  # still serves
    sweeps = body["checks"]["sweeps"]
    assert sweeps["age_s"] >= sweeps["stale_after_s"] == 5 and took < 5 + 10
    browser, _ = worker.signed_in()
    for path in ("/", "/alerts/", "/fleet/"):
        page = browser.get(path)
        assert page.status_code == 200
        assert "Expiry sweeps stopped" in page.text, path
        assert "leases are not being ended or alerted" in page.text
    # Back: the banner goes, the sweeps are fresh again.
    worker.start_worker()
    back = worker.db_now_ms()
    wait_for("a sweep after the restart", lambda: sweeps_completing_after(worker, back), 60, worker)
    assert "Expiry sweeps stopped" not in browser.get("/").text
