"""The worker and its broker (Celery: sweeps, notifications, retention; leaseboard/sweeps):
the broker, task limits, the sweep's pace, webhooks and e-mail notifications, and beat's
schedule.
"""

from __future__ import annotations

import json

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from leaseboard.domain.targets import networks_parsed
from leaseboard.envconf import (
    env_int,
    env_str,
)
from leaseboard.settings.base import DATA_DIR, LEASEBOARD_DEMO, TESTING
from leaseboard.settings.keys import LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S

REDIS_URL = env_str("REDIS_URL", "")

# --- Celery (sweeps, notifications, retention; leaseboard/sweeps) ---------------------
# Production: Redis from CELERY_BROKER_URL or REDIS_URL. Embedded default: kombu's
# filesystem transport under DATA_DIR, so `celery -A leaseboard worker -B` needs no server.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or REDIS_URL or "filesystem://"
# Longest a task may run before the worker kills it. The broker's visibility timeout must
# exceed every task's limit, or Redis redelivers a task that is still running.
CELERY_TASK_TIME_LIMIT = env_int("LEASEBOARD_TASK_TIME_LIMIT_S", 300, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = max(1, CELERY_TASK_TIME_LIMIT - 10)
LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S = env_int(
    "LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S", 3600, minimum=1
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S,
        # kombu's default is none: a black-holed broker host would hang a connect forever.
        "socket_connect_timeout": 5,
    }
# Our consumer: Celery's, made to survive losing Redis while it holds unacknowledged
# messages (celery 5.7.0 exits there; leaseboard/sweeps/consumer.py says why).
CELERY_WORKER_CONSUMER = "leaseboard.sweeps.consumer:Consumer"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits out a broker outage however long (reconnecting every 2 s at most:
# leaseboard/sweeps/consumer.py) rather than exit after Celery's 100 tries.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# One deployment (or test run) per queue name when several share a Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("LEASEBOARD_CELERY_QUEUE", "celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
# Ack early by default: a sweep lost with its worker is redone by the next tick. Tasks that
# must not be lost (notification deliveries) set acks_late themselves. Never reject on
# worker loss: a task that kills its worker would be redelivered forever.
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_REJECT_ON_WORKER_LOST = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

LEASEBOARD_SWEEP_INTERVAL_S = float(env_str("LEASEBOARD_SWEEP_INTERVAL_S", "1"))
if not 0.05 <= LEASEBOARD_SWEEP_INTERVAL_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_SWEEP_INTERVAL_S must be between 0.05 and 60")
LEASEBOARD_SWEEP_BATCH = env_int("LEASEBOARD_SWEEP_BATCH", 500, minimum=1)
# A sweep that last completed longer ago than this is stale (/healthz, /metrics, and a
# banner on every dashboard page): leases are not being ended or alerted.
LEASEBOARD_SWEEPS_STALE_AFTER_S = float(
    env_str("LEASEBOARD_SWEEPS_STALE_AFTER_S", "")
    or str(max(5.0, 10 * LEASEBOARD_SWEEP_INTERVAL_S))
)
# A sweep stops after this many batches; the next tick continues (bounded task time).
LEASEBOARD_SWEEP_MAX_BATCHES = env_int("LEASEBOARD_SWEEP_MAX_BATCHES", 200, minimum=1)
# A gap between sweeps longer than this is recorded as an outage window; leases that fell
# due inside a window longer than their own ttl get a recovery grace instead of expiring.
LEASEBOARD_OUTAGE_MIN_MS = env_int(
    "LEASEBOARD_OUTAGE_MIN_MS", max(3000, int(LEASEBOARD_SWEEP_INTERVAL_S * 3000)), minimum=1
)
LEASEBOARD_EVENT_RETENTION_DAYS = env_int("LEASEBOARD_EVENT_RETENTION_DAYS", 90, minimum=1)
# The HMAC key for webhooks that name no secret of their own. Never SECRET_KEY: a receiver
# holding it could forge sessions. Required when a webhook without its own secret is
# configured here; a queue's such webhook fails its delivery, naming this variable.
LEASEBOARD_WEBHOOK_SECRET = env_str("LEASEBOARD_WEBHOOK_SECRET", "")
if LEASEBOARD_WEBHOOK_SECRET and len(LEASEBOARD_WEBHOOK_SECRET) < 16:
    raise ImproperlyConfigured("LEASEBOARD_WEBHOOK_SECRET must be at least 16 characters")
LEASEBOARD_WEBHOOK_TIMEOUT_S = float(env_str("LEASEBOARD_WEBHOOK_TIMEOUT_S", "5"))
LEASEBOARD_WEBHOOK_MAX_RETRIES = env_int("LEASEBOARD_WEBHOOK_MAX_RETRIES", 8)
# Outbound policy (issue 33): webhooks reach only public addresses, checked when a URL is
# saved and again after DNS resolution when it is sent, unless their network is listed
# here (comma-separated CIDRs). The demo and the tests list loopback; production lists
# nothing by default, so a webhook cannot reach Redis, PostgreSQL or the app itself.
try:
    LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = networks_parsed(
        env_str(
            "LEASEBOARD_WEBHOOK_ALLOW_NETWORKS",
            "127.0.0.0/8,::1/128" if TESTING or LEASEBOARD_DEMO else "",
        )
    )
except ValueError as _exc:  # private: the package's star import leaves it
    raise ImproperlyConfigured(f"LEASEBOARD_WEBHOOK_ALLOW_NETWORKS: {_exc}") from None
# Epoch-advance notices: a web process enqueues at most one delivery run this often (a
# burst of grants costs one broker message); the sweep starts one whenever notices are due.
LEASEBOARD_EPOCH_NOTICE_FLUSH_S = float(env_str("LEASEBOARD_EPOCH_NOTICE_FLUSH_S", "0.2"))
if not 0 <= LEASEBOARD_EPOCH_NOTICE_FLUSH_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_EPOCH_NOTICE_FLUSH_S must be between 0 and 60")
# After a wake-up (an outbox drain asked for after a commit) could not be published, a
# process stops trying for this long; the sweep drains the outboxes meanwhile.
LEASEBOARD_WAKEUP_RETRY_AFTER_S = float(env_str("LEASEBOARD_WAKEUP_RETRY_AFTER_S", "5"))
# Notification targets for alerts that belong to no queue (outage recovery), same shape
# as Queue.notify: {"webhooks": [{"url": ..., "secret": ...}], "emails": [...]}.
try:
    LEASEBOARD_NOTIFY_DEFAULT = json.loads(env_str("LEASEBOARD_NOTIFY_DEFAULT", "{}") or "{}")
except ValueError:
    raise ImproperlyConfigured("LEASEBOARD_NOTIFY_DEFAULT must be a JSON object") from None
if not isinstance(LEASEBOARD_NOTIFY_DEFAULT, dict):
    raise ImproperlyConfigured("LEASEBOARD_NOTIFY_DEFAULT must be a JSON object")
if not LEASEBOARD_WEBHOOK_SECRET and any(
    isinstance(hook, dict) and not hook.get("secret")
    for hook in LEASEBOARD_NOTIFY_DEFAULT.get("webhooks") or []
):
    raise ImproperlyConfigured(
        "LEASEBOARD_NOTIFY_DEFAULT has a webhook without a secret: "
        "set LEASEBOARD_WEBHOOK_SECRET (or the hook's own secret)"
    )

CELERY_BEAT_SCHEDULE = {
    "lease-sweep": {
        "task": "leaseboard.sweeps.tasks.sweep",
        "schedule": LEASEBOARD_SWEEP_INTERVAL_S,
        # A sweep tick that waited longer than this is stale; a fresh one is coming.
        "options": {"expires": max(5.0, LEASEBOARD_SWEEP_INTERVAL_S * 5)},
    },
    "lease-event-retention": {
        "task": "leaseboard.sweeps.tasks.retention",
        "schedule": crontab(hour=3, minute=17),
    },
}
if LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S:
    CELERY_BEAT_SCHEDULE["audit-checkpoint"] = {
        "task": "leaseboard.core.tasks.audit_checkpoint",
        "schedule": float(LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S),
        "options": {"expires": float(LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S)},
    }
# --- end Celery ------------------------------------------------------------------------
