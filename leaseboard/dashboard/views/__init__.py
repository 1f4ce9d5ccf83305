"""Thin htmx views, one module per page or subject: one view serves the full page and its
fragment; each is gated on the server by the act it performs (`act_required`); reads come
from `selectors`, writes from core services, and what the views of several apps share
(gates, page rendering, redirects, refusals) from `leaseboard.web`."""

from leaseboard.dashboard.views.alerts import (
    alert_acknowledge,
    alert_badge,
    alerts,
    alerts_acknowledge_groups,
    alerts_snooze_groups,
    pending_badge,
)
from leaseboard.dashboard.views.alerts_bulk import alerts_acknowledge_bulk
from leaseboard.dashboard.views.audit import audit
from leaseboard.dashboard.views.blocked import blocked
from leaseboard.dashboard.views.executors import agent_quarantine, agent_quarantine_lift, executor
from leaseboard.dashboard.views.fleet import fleet
from leaseboard.dashboard.views.holds import lease_hold, lease_hold_release, leases_hold_bulk
from leaseboard.dashboard.views.live import live_leases
from leaseboard.dashboard.views.revocations import lease_revoke, leases_revoke_bulk
from leaseboard.dashboard.views.work import work_item

__all__ = [
    "agent_quarantine",
    "agent_quarantine_lift",
    "alert_acknowledge",
    "alert_badge",
    "alerts",
    "alerts_acknowledge_bulk",
    "alerts_acknowledge_groups",
    "alerts_snooze_groups",
    "audit",
    "blocked",
    "executor",
    "lease_hold",
    "lease_hold_release",
    "leases_hold_bulk",
    "fleet",
    "lease_revoke",
    "leases_revoke_bulk",
    "live_leases",
    "pending_badge",
    "work_item",
]
