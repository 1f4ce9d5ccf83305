"""Epoch-advance notices on real PostgreSQL: a grant writes one notice per listening
recipient in its own transaction; delivery (eager Celery here) signs it with the
recipient's webhook secret, retries, and logs on the row; the recipient's receiver raises
its epoch mark, so a paused holder's late send is refused as stale although the successor
never sent that recipient anything."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import EpochNotice
from leaseboard.core.services import effects as fx
from leaseboard.core.services import leases as ls
from leaseboard.core.services.fencing import fencing_public_keys
from leaseboard.core.services.recipients import recipient_webhook_clear, recipient_webhook_set
from leaseboard.sweeps import notifications, tasks
from leaseboard_recipient import EpochNoticeReceiver, InMemoryEpochGuard, TokenVerifier
from tests.builders import admit, effect_under, make_user
from tests.serving import served

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("fast_passwords")]


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class Endpoint:
    """A recipient's notice endpoint on a real socket; `fail_first` answers 503 first."""

    def __init__(self) -> None:
        self.guard = InMemoryEpochGuard()
        self.receiver: EpochNoticeReceiver | None = None
        self.fail_first = 0
        self.calls = 0

    def app(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.calls += 1
        if self.fail_first:
            self.fail_first -= 1
            start_response("503 Service Unavailable", [("Content-Length", "0")])
            return [b""]
        assert self.receiver is not None
        return self.receiver.wsgi(environ, start_response)


@pytest.fixture(autouse=True)
def _every_commit_flushes(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_EPOCH_NOTICE_FLUSH_S = 0  # no coalescing: one run per grant here


@pytest.fixture
def endpoint(celery_conf) -> Iterator[tuple[str, Endpoint]]:  # type: ignore[no-untyped-def]
    """(url, endpoint): a recipient's notice endpoint; notices are delivered eagerly."""
    celery_conf(task_always_eager=True)
    ep = Endpoint()
    with served(make_server("127.0.0.1", 0, ep.app, handler_class=_Quiet)) as base:
        yield f"{base}/epochs", ep


@pytest.mark.django_db(transaction=True)
def test_a_notice_lets_a_recipient_refuse_a_paused_holders_send_before_the_successors(
    agent, recipient, endpoint
):
    url, ep = endpoint
    recipient("ledger")
    ep.receiver = EpochNoticeReceiver(
        secret=recipient_webhook_set(name="ledger", url=url), guard=ep.guard
    )
    ledger = TokenVerifier(
        recipient="ledger", public_keys=fencing_public_keys(), guard=ep.guard, clock_ms=db_now_ms
    )
    admit("n-1")
    paused, _ = agent()
    successor, _ = agent()
    lease = ls.lease_acquire(work_key="n-1", executor=paused).lease
    assert ep.guard.high_water("n-1") == 1  # told of epoch 1 on commit
    # ... with the grant's generation: the mark is the whole fencing order (docs/design.md §5).
    assert ep.guard.mark("n-1") == (lease.generation, 1)
    effect = effect_under(lease, paused, "p-1", kind="payment.charge", target="acct")
    assert ledger.check(effect.fencing_token, work_key="n-1").accepted
    fx.effect_report_outcome(effect_id=effect.id, executor=paused, outcome="applied")
    approver = Actor.human(make_user("abe-notice", "approver"))
    ls.lease_revoke(
        lease_id=lease.id, actor=approver, reason_category="other", reason_text="paused too long"
    )
    assert ls.lease_acquire(work_key="n-1", executor=successor).lease.epoch == 2

    # The successor has sent the ledger nothing; the notice alone raised the mark.
    assert ep.guard.high_water("n-1") == 2
    late = ledger.check(effect.fencing_token, work_key="n-1")  # still unexpired
    assert (late.accepted, late.code, late.high_water) == (False, "stale_epoch", 2)
    rows = list(EpochNotice.objects.order_by("epoch").values_list("epoch", "status", "attempts"))
    assert rows == [(1, "delivered", 1), (2, "delivered", 1)]


@pytest.mark.django_db(transaction=True)
def test_a_failed_notice_is_retried_and_logged_and_a_cleared_webhook_gets_none(
    agent, recipient, endpoint, monkeypatch
):
    url, ep = endpoint
    monkeypatch.setattr(notifications, "backoff_s", lambda attempt: 0)
    recipient("records")
    ep.receiver = EpochNoticeReceiver(
        secret=recipient_webhook_set(name="records", url=url), guard=ep.guard
    )
    ep.fail_first = 1
    admit("n-2")
    a, _ = agent()
    ls.lease_acquire(work_key="n-2", executor=a)
    notice = EpochNotice.objects.get()
    assert (notice.status, notice.attempts, notice.last_status_code) == ("pending", 1, 503)
    assert ep.guard.high_water("n-2") is None
    tasks.sweep()  # the sweep sees a due notice and starts a delivery run (eager here)
    notice.refresh_from_db()
    assert (notice.status, notice.attempts, notice.last_error) == ("delivered", 2, "")
    assert ep.calls == 2 and ep.guard.high_water("n-2") == 1

    recipient_webhook_clear(name="records")
    admit("n-3")
    ls.lease_acquire(work_key="n-3", executor=a)
    assert EpochNotice.objects.count() == 1 and ep.calls == 2


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_grants_goes_out_as_one_signed_batch_per_recipient(
    agent, recipient, endpoint, settings
):
    url, ep = endpoint
    settings.LEASEBOARD_EPOCH_NOTICE_FLUSH_S = 60  # coalesced: the burst enqueues nothing more
    # The process's one wake-up of the window (nothing due yet); the burst's are coalesced.
    tasks.wake(tasks.deliver_epoch_notices, min_interval_s=60)
    recipient("batch")
    ep.receiver = EpochNoticeReceiver(
        secret=recipient_webhook_set(name="batch", url=url), guard=ep.guard
    )
    a, _ = agent()
    for i in range(5):
        admit(f"b-{i}")
        ls.lease_acquire(work_key=f"b-{i}", executor=a)
    assert ep.calls == 0 and EpochNotice.objects.filter(status="pending").count() == 5
    tasks.sweep()  # the safety net: notices are due, one run sends them
    assert ep.calls == 1  # one POST for the five
    assert [ep.guard.high_water(f"b-{i}") for i in range(5)] == [1] * 5
    assert set(EpochNotice.objects.values_list("status", "attempts")) == {("delivered", 1)}


@pytest.mark.django_db(transaction=True)
def test_a_notice_signed_with_another_secret_moves_no_mark_and_fails_for_good(
    agent, recipient, endpoint
):
    url, ep = endpoint
    recipient("deploys")
    recipient_webhook_set(name="deploys", url=url)
    ep.receiver = EpochNoticeReceiver(secret="whsec_someone-elses", guard=ep.guard)
    admit("n-4")
    a, _ = agent()
    ls.lease_acquire(work_key="n-4", executor=a)
    notice = EpochNotice.objects.get()
    assert (notice.status, notice.last_status_code) == ("dead", 401)  # no retry storm
    assert ep.guard.high_water("n-4") is None
