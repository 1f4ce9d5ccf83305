"""Alerts, by subject (re-exported here, where callers import them from):

- raising: `alerts_open`, `lease_alert`, `expiry_alert` (leaseboard.core.services.alert_raise);
- folding into incidents: per agent, then bursts across agents into one incident of their
  queue (alert_folding, alert_bursts; `alert_groups_settle` is a sweep step);
- reconciliation alerts and resolving (alert_resolution);
- acknowledging and snoozing, one alert or by group (alert_acknowledge).
"""

from __future__ import annotations

from leaseboard.core.services.alert_acknowledge import (
    GROUPS_MAX,
    NOTE_MAX,
    SNOOZE_MAX_MINUTES,
    Acknowledgement,
    alert_acknowledge,
    alerts_acknowledge_groups,
    alerts_snooze_groups,
    parse_alert_groups,
)
from leaseboard.core.services.alert_bursts import (
    BURST_KINDS,
    BurstJoins,
    alert_groups_settle,
    alerts_group_bursts,
    burst_joins_plan,
    burst_message,
)
from leaseboard.core.services.alert_folding import (
    FOLDING_KINDS,
    alerts_fold,
    alerts_fold_per_agent,
    alerts_fold_written,
)
from leaseboard.core.services.alert_raise import (
    EXPIRY_KINDS,
    alerts_open,
    expiry_alert,
    expiry_alert_kind,
    expiry_alert_words,
    lease_alert,
    lease_alert_key,
)
from leaseboard.core.services.alert_resolution import (
    RECONCILIATION_EFFECTS_NAMED,
    alerts_resolve,
    reconciliation_alerts_open,
    reconciliation_alerts_resolve_if_done,
)

__all__ = [
    "BURST_KINDS",
    "EXPIRY_KINDS",
    "FOLDING_KINDS",
    "GROUPS_MAX",
    "NOTE_MAX",
    "RECONCILIATION_EFFECTS_NAMED",
    "SNOOZE_MAX_MINUTES",
    "Acknowledgement",
    "BurstJoins",
    "alert_acknowledge",
    "alert_groups_settle",
    "alerts_acknowledge_groups",
    "alerts_fold",
    "alerts_fold_per_agent",
    "alerts_fold_written",
    "alerts_group_bursts",
    "alerts_open",
    "alerts_resolve",
    "alerts_snooze_groups",
    "burst_joins_plan",
    "burst_message",
    "expiry_alert",
    "expiry_alert_kind",
    "expiry_alert_words",
    "lease_alert",
    "lease_alert_key",
    "parse_alert_groups",
    "reconciliation_alerts_open",
    "reconciliation_alerts_resolve_if_done",
]
