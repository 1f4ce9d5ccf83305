"""Models of the lease runtime, one subject per module."""

from leaseboard.core.models.alerts import Alert, AlertSnooze
from leaseboard.core.models.audit import AuditEntry, AuditHead
from leaseboard.core.models.effects import Effect
from leaseboard.core.models.executors import Executor
from leaseboard.core.models.leases import Checkpoint, FencingKey, Lease, LeaseEvent
from leaseboard.core.models.people import RoleScope
from leaseboard.core.models.policy import EffectKindDisplay, EffectRule, GlobalPolicy
from leaseboard.core.models.recipients import EpochNotice, Recipient
from leaseboard.core.models.supervision import BulkRevoke, Quarantine, ReasonCategory
from leaseboard.core.models.work import Queue, WorkItem

__all__ = [
    "Alert",
    "AlertSnooze",
    "AuditEntry",
    "AuditHead",
    "BulkRevoke",
    "Checkpoint",
    "Effect",
    "EffectKindDisplay",
    "EffectRule",
    "EpochNotice",
    "Executor",
    "FencingKey",
    "GlobalPolicy",
    "Lease",
    "LeaseEvent",
    "Quarantine",
    "Queue",
    "ReasonCategory",
    "Recipient",
    "RoleScope",
    "WorkItem",
]
