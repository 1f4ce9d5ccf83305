"""Lease services, one subject per module: grants (acquire and the grant primitive),
renewals, holding (checkpoints, standing extension), ending (release, revoke, hand back,
expiry), and base (what they share). Import from here; the modules are the layout."""

from leaseboard.core.services.leases.base import (
    executor_id_of,
    lease_id_or_none,
    leases_in_work_item_order,
    next_grant_at,
    parse_lease_id,
    timing_for,
    unreconciled_effects_exist,
)
from leaseboard.core.services.leases.ending import (
    lease_end_locked,
    lease_expire_if_due_locked,
    lease_for_revoke_locked,
    lease_hand_back_locked,
    lease_release,
    lease_revoke,
    lease_revoke_audited_locked,
    lease_revoke_locked,
    leases_expire_locked,
    revoke_reason,
)
from leaseboard.core.services.leases.grants import (
    Grant,
    fence_of_latest_locked,
    lease_acquire,
    lease_assign_locked,
    lease_grant_locked,
    live_lease_locked,
)
from leaseboard.core.services.leases.holding import (
    checkpoint_save_locked,
    held_lease_locked,
    lease_checkpoint,
    lease_extend_locked,
)
from leaseboard.core.services.leases.renewals import (
    BatchResult,
    Renewal,
    lease_renew,
    lease_renew_many,
)

__all__ = [
    "BatchResult",
    "Grant",
    "Renewal",
    "executor_id_of",
    "lease_id_or_none",
    "leases_in_work_item_order",
    "fence_of_latest_locked",
    "held_lease_locked",
    "lease_acquire",
    "lease_assign_locked",
    "lease_checkpoint",
    "lease_end_locked",
    "lease_expire_if_due_locked",
    "lease_extend_locked",
    "checkpoint_save_locked",
    "lease_for_revoke_locked",
    "lease_grant_locked",
    "lease_hand_back_locked",
    "lease_release",
    "lease_renew",
    "lease_renew_many",
    "lease_revoke",
    "lease_revoke_audited_locked",
    "lease_revoke_locked",
    "leases_expire_locked",
    "live_lease_locked",
    "next_grant_at",
    "parse_lease_id",
    "revoke_reason",
    "timing_for",
    "unreconciled_effects_exist",
]
