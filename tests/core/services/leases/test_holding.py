"""Acts under a held lease that are neither renewal nor an end
(leaseboard.core.services.leases.holding), on real PostgreSQL: checkpoints numbered per
work item across holders, refused whole (nothing written) when the caller does not hold
the lease at that epoch or the document is null or too big."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Checkpoint
from leaseboard.core.services.leases.ending import lease_release
from leaseboard.core.services.leases.grants import lease_acquire
from leaseboard.core.services.leases.holding import lease_checkpoint
from leaseboard.domain.errors import LeaseboardError, ValidationFailed
from tests.builders import leased_item

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_checkpoints_are_numbered_per_work_item_across_holders(agent) -> None:
    first, _ = agent()
    lease = leased_item(first, key="cp-1")
    one = lease_checkpoint(lease_id=lease.id, executor=first, epoch=1, data={"step": 1})
    two = lease_checkpoint(lease_id=str(lease.id), executor=first, epoch=1, data=[2])
    lease_release(lease_id=lease.id, executor=first, epoch=1)
    second, _ = agent()
    successor = lease_acquire(work_key="cp-1", executor=second).lease
    three = lease_checkpoint(lease_id=successor.id, executor=second, epoch=2, data="three")
    assert [(c.seq, c.epoch, c.data) for c in (one, two, three)] == [
        (1, 1, {"step": 1}),
        (2, 1, [2]),
        (3, 2, "three"),
    ]
    assert one.size_bytes == len(b'{"step":1}')  # the compact encoding's size
    assert three.lease_id == successor.id


def test_a_stale_epoch_or_another_holder_writes_no_checkpoint(agent) -> None:
    holder, _ = agent()
    other, _ = agent()
    lease = leased_item(holder, key="cp-2")
    for executor, epoch, code in ((holder, 7, "stale_epoch"), (other, 1, "not_holder")):
        with pytest.raises(LeaseboardError) as refused:
            lease_checkpoint(lease_id=lease.id, executor=executor, epoch=epoch, data={})
        assert refused.value.code == code
    assert not Checkpoint.objects.filter(work_item_id=lease.work_item_id).exists()


def test_a_null_or_oversized_document_is_refused_at_its_field(agent, settings) -> None:
    executor, _ = agent()
    lease = leased_item(executor, key="cp-3")
    settings.LEASEBOARD_MAX_CHECKPOINT_BYTES = 64
    for data in (None, {"blob": "x" * 100}):
        with pytest.raises(ValidationFailed) as refused:
            lease_checkpoint(lease_id=lease.id, executor=executor, epoch=1, data=data)
        assert refused.value.extra["param"] == "data"
    assert not Checkpoint.objects.filter(work_item_id=lease.work_item_id).exists()
