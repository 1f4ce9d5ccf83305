"""Models of the lease runtime, one subject per module."""

from leaseboard.core.models.alerts import Alert
from leaseboard.core.models.audit import AuditEntry, AuditHead
from leaseboard.core.models.effects import Effect
from leaseboard.core.models.executors import Executor
from leaseboard.core.models.leases import Checkpoint, FencingKey, Lease, LeaseEvent
from leaseboard.core.models.policy import EffectRule
from leaseboard.core.models.recipients import EpochNotice, Recipient
from leaseboard.core.models.work import Queue, WorkItem

__all__ = [
    "Alert",
    "AuditEntry",
    "AuditHead",
    "Checkpoint",
    "Effect",
    "EffectRule",
    "EpochNotice",
    "Executor",
    "FencingKey",
    "Lease",
    "LeaseEvent",
    "Queue",
    "Recipient",
    "WorkItem",
]
