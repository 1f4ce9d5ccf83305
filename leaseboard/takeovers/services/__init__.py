"""Takeover workflow services, one subject per module: requests, decisions (approve,
reject, break-glass, review) with approval (the approval's steps), standing (acts under
human standing) and expiry (the sweep step). Each public service is the outermost
transaction (`atomic(durable=True)`), asks the core authority, and changes leases, effects
and alerts only through core services."""

from leaseboard.takeovers.services._common import (
    decision_ttl_ms,
    standing_default_ms,
    standing_max_ms,
    standing_min_ms,
)
from leaseboard.takeovers.services.decisions import (
    intervention_review,
    takeover_approve,
    takeover_break_glass,
    takeover_reject,
)
from leaseboard.takeovers.services.expiry import takeover_requests_expire_due
from leaseboard.takeovers.services.requests import (
    BULK_MAX_ITEMS,
    BulkOutcome,
    takeover_bulk_request,
    takeover_request,
)
from leaseboard.takeovers.services.standing import (
    effect_record_human,
    standing_assign,
    standing_checkpoint,
    standing_complete,
    standing_extend,
    standing_hand_back,
)

__all__ = [
    "BULK_MAX_ITEMS",
    "BulkOutcome",
    "decision_ttl_ms",
    "effect_record_human",
    "intervention_review",
    "standing_assign",
    "standing_complete",
    "standing_default_ms",
    "standing_checkpoint",
    "standing_extend",
    "standing_hand_back",
    "standing_max_ms",
    "standing_min_ms",
    "takeover_approve",
    "takeover_break_glass",
    "takeover_bulk_request",
    "takeover_reject",
    "takeover_request",
    "takeover_requests_expire_due",
]
