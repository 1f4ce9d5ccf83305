"""Leaseboard's own behaviour: request and payload limits, default lease timing, fencing
token life and clock skew, approvals, takeovers, policy and the dashboard.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from leaseboard.domain.timing import TimingPolicy, TimingPolicyError, skew_allowance_checked
from leaseboard.envconf import (
    env_bool,
    env_int,
    env_str,
)
from leaseboard.settings.base import DEBUG, TESTING

# A request body above this is refused before any view runs (API: 413 validation_error).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("LEASEBOARD_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
LEASEBOARD_MAX_CHECKPOINT_BYTES = env_int("LEASEBOARD_MAX_CHECKPOINT_BYTES", 256 * 1024, minimum=1)
LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES = env_int("LEASEBOARD_MAX_EFFECT_PAYLOAD_BYTES", 64 * 1024)
# What a rule's condition may read (issue 33): a payload or scope with a list or map longer
# than this, or nested deeper, is not evaluated; the rule fails closed. CEL's own runtime
# also stops any one evaluation after 10,000 iterations in all (fixed in cel-expr-python).
LEASEBOARD_RULE_MAX_ITEMS = env_int("LEASEBOARD_RULE_MAX_ITEMS", 10_000, minimum=1)
LEASEBOARD_RULE_MAX_DEPTH = env_int("LEASEBOARD_RULE_MAX_DEPTH", 32, minimum=1)
LEASEBOARD_MAX_BATCH_RENEW = env_int("LEASEBOARD_MAX_BATCH_RENEW", 1000, minimum=1)
# Seconds a process remembers a bearer token it has verified (0: always ask the database).
LEASEBOARD_TOKEN_CACHE_SECONDS = float(env_str("LEASEBOARD_TOKEN_CACHE_SECONDS", "2"))

# Default lease timing (docs/design.md §4), overridable per queue and per work item. Validated now,
# so a bad deployment refuses to start instead of handing out unsafe leases.
LEASE_DEFAULTS = TimingPolicy(
    ttl_ms=env_int("LEASE_TTL_MS", 15_000, minimum=1),
    renew_after_ms=env_int("LEASE_RENEW_AFTER_MS", 0) or None,
    jeopardy_after_ms=env_int("LEASE_JEOPARDY_AFTER_MS", 0) or None,
    lock_delay_ms=env_int("LEASE_LOCK_DELAY_MS", 0),
    max_lifetime_ms=env_int("LEASE_MAX_LIFETIME_MS", 24 * 3600 * 1000, minimum=1),
)
try:
    LEASE_DEFAULTS = LEASE_DEFAULTS.resolved()
except TimingPolicyError as _exc:
    raise ImproperlyConfigured(f"lease timing: {_exc}") from None

# Test-only seam (docs/design.md §3): milliseconds added, in SQL, to the database clock.
LEASEBOARD_DB_CLOCK_OFFSET_MS = env_int("LEASEBOARD_DB_CLOCK_OFFSET_MS", 0, minimum=-(10**12))
if LEASEBOARD_DB_CLOCK_OFFSET_MS and not (TESTING or DEBUG):
    raise ImproperlyConfigured(
        "LEASEBOARD_DB_CLOCK_OFFSET_MS is a test seam; unset it in production"
    )

# An effect's fencing token dies with the standing it proves: at the lease's expiry at the
# moment of issue, and never more than this after issue (the signing keys' settings follow
# the audit key's).
FENCING_TOKEN_TTL_MS = env_int("LEASEBOARD_FENCING_TOKEN_TTL_MS", 60_000, minimum=1000)
# Clock-skew allowance between the database clock and recipients' clocks: a successor acts
# only once every open token of its predecessor has expired plus this (docs/design.md §5).
try:
    LEASEBOARD_FENCING_SKEW_MS = skew_allowance_checked(
        env_int("LEASEBOARD_FENCING_SKEW_MS", 1000), ttl_ms=LEASE_DEFAULTS.ttl_ms
    )
except TimingPolicyError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None

# --- Effect approvals (docs/approvals.md) -----------------------------------------------
# How long an approver has to decide a require_approval effect when its rule does not say
# (then the rule's on_timeout decision applies: reject unless the rule says approve), and
# how long before that deadline approvers are reminded.
LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS = env_int(
    "LEASEBOARD_APPROVAL_DECIDE_WITHIN_MS", 15 * 60_000, minimum=1_000
)
LEASEBOARD_APPROVAL_REMIND_BEFORE_MS = env_int(
    "LEASEBOARD_APPROVAL_REMIND_BEFORE_MS", 5 * 60_000, minimum=0
)
# The address decision-page links in approvers' e-mails and chat messages start with.
LEASEBOARD_PUBLIC_URL = os.environ.get("LEASEBOARD_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Takeovers (leaseboard/takeovers) ---------------------------------------------------
# Human standing granted by an approved takeover: default, minimum and maximum length, and
# how long a takeover request waits for a decision before it expires.
LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS", 30 * 60_000, minimum=60_000
)
LEASEBOARD_TAKEOVER_MIN_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_MIN_STANDING_MS", 60_000, minimum=1_000
)
LEASEBOARD_TAKEOVER_MAX_STANDING_MS = env_int(
    "LEASEBOARD_TAKEOVER_MAX_STANDING_MS", 4 * 3600_000, minimum=60_000
)
LEASEBOARD_TAKEOVER_DECISION_TTL_MS = env_int(
    "LEASEBOARD_TAKEOVER_DECISION_TTL_MS", 15 * 60_000, minimum=10_000
)
if not (
    LEASEBOARD_TAKEOVER_MIN_STANDING_MS
    <= LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS
    <= LEASEBOARD_TAKEOVER_MAX_STANDING_MS
):
    raise ImproperlyConfigured(
        "LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS must lie between the MIN and MAX standing"
    )

# --- Policy and configuration (leaseboard/policy, docs/policy.md) -----------------------
# Four-eyes: a change to a queue's commit-time rules waits for a second admin's approval.
LEASEBOARD_POLICY_FOUR_EYES = env_bool("LEASEBOARD_POLICY_FOUR_EYES", False)


# --- Dashboard (leaseboard/dashboard) ---------------------------------------------------
# A person whose roles are all held for named queues sees only those queues' work on the
# live page (off: everyone sees every queue, and may act only in their own).
LEASEBOARD_HIDE_OTHER_QUEUES = env_bool("LEASEBOARD_HIDE_OTHER_QUEUES", False)
# Recurrences of one agent's alerts of one kind within this long of the open incident's
# last sighting fold into it (count, first and last seen) instead of opening new alerts;
# 0 turns folding off (core.services.alerts.alerts_fold).
LEASEBOARD_ALERT_FOLD_WINDOW_MS = env_int("LEASEBOARD_ALERT_FOLD_WINDOW_MS", 600_000, minimum=0)
# A burst: this many alerts of one kind in one queue within the window (different agents,
# a region failing) become one incident with a count instead of one row each; every lease
# keeps its own alert, resolved and pointing at it (core.services.alert_bursts). A window
# of 0 turns grouping off.
LEASEBOARD_ALERT_BURST_MIN = env_int("LEASEBOARD_ALERT_BURST_MIN", 20, minimum=2)
LEASEBOARD_ALERT_BURST_WINDOW_MS = env_int("LEASEBOARD_ALERT_BURST_WINDOW_MS", 60_000, minimum=0)
# How long an ended lease stays on the live page (greyed, with its end reason, in the
# section below the live ones) so the row someone is about to click does not vanish.
LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS = env_int(
    "LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS", 120_000, minimum=0
)
