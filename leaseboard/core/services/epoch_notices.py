"""Epoch-advance notices: every grant that raises an epoch tells each recipient that
registered a webhook (work key, new epoch), so it learns the successor's epoch before the
successor's first send and refuses a paused holder's late one as stale (docs/design.md §5).

The notice rows are an outbox written in the grant's own transaction; delivery (batched
per recipient, signed, retried, logged on the rows) is leaseboard.sweeps' job, enqueued on
commit through the `epoch_notices_opened` signal. Nothing here does network I/O.
"""

from __future__ import annotations

from django.db.models import Exists, Q

from leaseboard.core.models import EpochNotice, Recipient
from leaseboard.core.signals import epoch_notices_opened

LISTENING = Q(is_active=True) & ~Q(webhook_url="")


def recipients_listening() -> Exists:
    """Whether any recipient listens, as an expression the acquire folds into its one gate
    read: a fleet with no webhook pays no extra statement per grant."""
    return Exists(Recipient.objects.filter(LISTENING))


def epoch_notices_open(*, work_item_id: int, epoch: int, generation: int = 0) -> list[int]:
    """Write one pending notice per listening recipient (inside the grant's transaction)
    and announce them; returns their ids. `generation` is the grant's (docs/design.md §5)."""
    recipient_ids = list(Recipient.objects.filter(LISTENING).values_list("id", flat=True))
    if not recipient_ids:
        return []
    notices = EpochNotice.objects.bulk_create(
        [
            EpochNotice(
                recipient_id=rid, work_item_id=work_item_id, epoch=epoch, generation=generation
            )
            for rid in recipient_ids
        ]
    )
    ids = [notice.id for notice in notices]
    epoch_notices_opened.send(sender=EpochNotice, notice_ids=ids)
    return ids


def epoch_notices_payload(notices: list[EpochNotice]) -> dict[str, object]:
    """What a recipient is told, in one POST for a batch: enough to raise its high-water
    marks, nothing more."""
    return {
        "type": "epoch_advanced",
        "notices": [
            {
                "work_key": n.work_item.key,
                "epoch": n.epoch,
                "generation": n.generation,
                "notice_id": n.id,
            }
            for n in notices
        ],
    }
