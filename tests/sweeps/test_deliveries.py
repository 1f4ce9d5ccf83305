"""leaseboard.sweeps.deliveries on real PostgreSQL: the delivery log reads the latest rows
of each outbox (alert notifications, approver notices, epoch-advance notices), newest
first, filtered by one status when asked (an unknown status means all), with every
outbox's rows counted by status whatever the filter."""

from __future__ import annotations

import pytest

from leaseboard.core.models import EpochNotice
from leaseboard.core.services.epoch_notices import epoch_notices_open
from leaseboard.core.services.recipients import recipient_webhook_set
from leaseboard.sweeps.deliveries import delivery_log
from tests.builders import admit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def notices(recipient) -> list[int]:  # type: ignore[no-untyped-def]
    """Three epoch notices to one recipient: the oldest delivered, the newest dead."""
    recipient("ledger")
    recipient_webhook_set(name="ledger", url="https://ledger.example/epochs")
    ids = [epoch_notices_open(work_item_id=admit(f"dl-{n}").id, epoch=1)[0] for n in range(3)]
    EpochNotice.objects.filter(id=ids[0]).update(status="delivered", attempts=1)
    EpochNotice.objects.filter(id=ids[2]).update(status="dead", attempts=5)
    return ids


def test_every_status_newest_first_with_the_counts(notices):  # type: ignore[no-untyped-def]
    log = delivery_log()
    assert log.status == ""
    assert [n.id for n in log.epochs] == notices[::-1]
    assert log.epochs[0].work_item.key == "dl-2" and log.epochs[0].recipient.name == "ledger"
    assert log.counts["epochs"] == {"delivered": 1, "pending": 1, "dead": 1}
    assert log.alerts == [] and log.approvals == []
    assert log.counts["alerts"] == {} and log.counts["approvals"] == {}


def test_one_status_filters_the_rows_but_not_the_counts(notices):  # type: ignore[no-untyped-def]
    log = delivery_log(status="dead")
    assert log.status == "dead"
    assert [n.id for n in log.epochs] == [notices[2]]
    assert log.counts["epochs"] == {"delivered": 1, "pending": 1, "dead": 1}


def test_an_unknown_status_shows_every_row(notices):  # type: ignore[no-untyped-def]
    log = delivery_log(status="'; drop table --")
    assert log.status == "" and len(log.epochs) == 3


def test_the_limit_keeps_the_newest(notices):  # type: ignore[no-untyped-def]
    assert [n.id for n in delivery_log(limit=2).epochs] == notices[:0:-1]


def test_alert_notifications_are_logged_beside_the_epoch_notices(scene, settings, notices):  # type: ignore[no-untyped-def]
    from leaseboard.core.services.alerts import alerts_open, lease_alert
    from leaseboard.sweeps.models import NotificationDelivery

    alert_id = alerts_open([lease_alert(scene.lease, "jeopardy", "m", due_at_ms=0, now_ms=0)])[0]
    NotificationDelivery.objects.create(
        alert_id=alert_id, channel="webhook", target="https://x.example/"
    )
    log = delivery_log()
    assert [d.alert_id for d in log.alerts] == [alert_id]
    assert log.counts["alerts"] == {"pending": 1}
