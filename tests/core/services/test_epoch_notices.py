"""leaseboard.core.services.epoch_notices on real PostgreSQL: the notices a grant writes
(one per recipient listening on a webhook, none for one without a webhook or turned off),
the one-read gate the acquire folds in, and the payload a recipient is sent. Delivery is
tests/sweeps/test_epoch_notices.py's subject."""

from __future__ import annotations

import pytest

from leaseboard.core.models import EpochNotice, Recipient

# deliberate: an import list and the module marks (alike in shape only).
from leaseboard.core.services.epoch_notices import (
    epoch_notices_open,
    epoch_notices_payload,
    recipients_listening,
)
from leaseboard.core.services.recipients import (
    recipient_webhook_clear,
    recipient_webhook_set,
)
from tests.builders import admit

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _listening() -> bool:
    return bool(
        Recipient.objects.annotate(on=recipients_listening()).values_list("on", flat=True).first()
    )


def test_without_a_listening_recipient_a_grant_writes_nothing(recipient):  # type: ignore[no-untyped-def]
    recipient("quiet")  # registered, but no webhook
    item = admit("en-1")
    assert not _listening()
    assert epoch_notices_open(work_item_id=item.id, epoch=1) == []
    assert not EpochNotice.objects.exists()


def test_one_pending_notice_per_listening_recipient(recipient):  # type: ignore[no-untyped-def]
    for name in ("ledger", "bank", "off", "silent"):
        recipient(name)
    for name in ("ledger", "bank", "off"):
        recipient_webhook_set(name=name, url=f"https://{name}.example/epochs")
    Recipient.objects.filter(name="off").update(is_active=False)  # turned off: told nothing
    item = admit("en-2")
    assert _listening()
    ids = epoch_notices_open(work_item_id=item.id, epoch=7, generation=2)
    rows = EpochNotice.objects.filter(id__in=ids).select_related("recipient")
    assert sorted(n.recipient.name for n in rows) == ["bank", "ledger"]
    assert {(n.work_item_id, n.epoch, n.generation, n.status) for n in rows} == {
        (item.id, 7, 2, "pending")
    }


def test_a_cleared_webhook_stops_the_notices(recipient):  # type: ignore[no-untyped-def]
    recipient("ledger")
    recipient_webhook_set(name="ledger", url="https://ledger.example/epochs")
    assert recipient_webhook_clear(name="ledger")
    assert not _listening()
    assert epoch_notices_open(work_item_id=admit("en-3").id, epoch=1) == []


def test_the_payload_names_each_notices_work_key_epoch_and_generation(recipient):  # type: ignore[no-untyped-def]
    recipient("ledger")
    recipient_webhook_set(name="ledger", url="https://ledger.example/epochs")
    a, b = admit("en-a"), admit("en-b")
    ids = epoch_notices_open(work_item_id=a.id, epoch=3) + epoch_notices_open(
        work_item_id=b.id, epoch=5, generation=1
    )
    notices = list(
        EpochNotice.objects.filter(id__in=ids).select_related("work_item").order_by("id")
    )
    assert epoch_notices_payload(notices) == {
        "type": "epoch_advanced",
        "notices": [
            {"work_key": "en-a", "epoch": 3, "generation": 0, "notice_id": ids[0]},
            {"work_key": "en-b", "epoch": 5, "generation": 1, "notice_id": ids[1]},
        ],
    }
