"""Signals core sends so that higher layers can act on its events without core importing
them. Receivers are connected in their app's `AppConfig.ready()`, where the wiring shows.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent by `alerts_open` inside the transaction that opened the alerts, with `alert_ids`: only
# the alerts this call opened. Receivers do no I/O here; they enqueue work on commit.
# Connected: leaseboard.sweeps (notification fan-out).
alerts_opened = Signal()

# Sent by `epoch_notices_open` inside the grant's transaction, with `notice_ids`: the
# epoch-advance notices (outbox rows) that grant wrote. Receivers enqueue on commit.
# Connected: leaseboard.sweeps (recipient webhook delivery).
epoch_notices_opened = Signal()

# Sent by `effect_propose` inside the transaction that made an effect wait for approval,
# with `effect`: the pending Effect row. Receivers write their outbox rows in that same
# transaction and enqueue delivery on commit.
# Connected: leaseboard.sweeps (approver notifications by e-mail and webhook).
approval_requested = Signal()
