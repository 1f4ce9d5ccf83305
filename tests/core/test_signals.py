"""leaseboard.core.signals on real PostgreSQL: each signal is sent by the core service that
names it, inside that service's transaction, with only the rows that call wrote, so a
higher layer's receiver (connected here for the test, as an app connects its own in
`ready()`) sees exactly what it must act on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from leaseboard.core import signals
from leaseboard.core.models import Alert, EpochNotice
from leaseboard.core.services.alerts import alerts_open, lease_alert
from leaseboard.core.services.epoch_notices import epoch_notices_open
from leaseboard.core.services.recipients import recipient_webhook_set
from tests.builders import effect_rules, effect_under

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def heard() -> Iterator[list[dict[str, Any]]]:
    """Every send of the three signals, with its arguments and whether a transaction was
    open when it was sent."""
    calls: list[dict[str, Any]] = []

    def receiver(sender: Any, signal: Any, **kw: Any) -> None:
        calls.append(
            {"signal": signal, "sender": sender, "in_atomic": connection.in_atomic_block, **kw}
        )

    wired = (signals.alerts_opened, signals.epoch_notices_opened, signals.approval_requested)
    for signal in wired:
        signal.connect(receiver, weak=False, dispatch_uid="test_signals")
    yield calls
    for signal in wired:
        signal.disconnect(dispatch_uid="test_signals")


def test_alerts_opened_names_only_the_alerts_that_call_opened(scene, heard):  # type: ignore[no-untyped-def]
    def make() -> Alert:
        return lease_alert(scene.lease, "jeopardy", "late renew", due_at_ms=0, now_ms=0)

    first = alerts_open([make()])
    assert len(first) == 1
    mine = [c for c in heard if c["signal"] is signals.alerts_opened]
    assert [c["alert_ids"] for c in mine] == [first]
    heard.clear()
    assert alerts_open([make()]) == []  # the same dedupe key: nothing opened, nothing sent
    assert not [c for c in heard if c["signal"] is signals.alerts_opened]


def test_epoch_notices_opened_carries_the_notice_ids_the_grant_wrote(db, recipient, heard):  # type: ignore[no-untyped-def]
    recipient("ledger")
    recipient_webhook_set(name="ledger", url="https://ledger.example/epochs")
    from tests.builders import admit

    item = admit("sig-1")
    ids = epoch_notices_open(work_item_id=item.id, epoch=4)
    sent = [c for c in heard if c["signal"] is signals.epoch_notices_opened]
    assert [(c["sender"], c["notice_ids"]) for c in sent] == [(EpochNotice, ids)]
    assert set(EpochNotice.objects.filter(id__in=ids).values_list("epoch", flat=True)) == {4}


def test_approval_requested_is_sent_in_the_proposals_transaction_with_the_pending_effect(
    scene, heard
):  # type: ignore[no-untyped-def]
    effect_rules(scene.lease.work_item.queue, ("payment.*", "require_approval"))
    effect = effect_under(
        scene.lease, scene.agent, "sig-approval", kind="payment.refund", target="order-1"
    )
    sent = [c for c in heard if c["signal"] is signals.approval_requested]
    assert len(sent) == 1
    assert sent[0]["effect"].id == effect.id and sent[0]["effect"].decision == "pending_approval"
    assert sent[0]["in_atomic"]
