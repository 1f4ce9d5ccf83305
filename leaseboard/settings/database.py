"""The database: PostgreSQL from DATABASE_URL (else the embedded SQLite file), an optional
read replica, and the bounds every connection and request has on it
(docs/design.md §14, docs/deployment.md "When parts fail").
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import (
    database_from_url,
    db_timeouts,
    env_int,
    env_str,
    sqlite_database,
)
from leaseboard.settings.base import DATA_DIR, TESTING

# --- When the database fails (docs/design.md §14, docs/deployment.md "When parts fail") ---------
# Connect timeout, and the statement and lock timeouts every web connection has by default
# (the hot paths'; enforced by the server): leaseboard.envconf.db_timeouts.
(
    LEASEBOARD_DB_CONNECT_TIMEOUT_S,
    LEASEBOARD_DB_STATEMENT_TIMEOUT_MS,
    LEASEBOARD_DB_LOCK_TIMEOUT_MS,
) = db_timeouts()
# Sweeps, retention and config apply: their transactions' own, longer bounds (SET LOCAL).
LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS = env_int(
    "LEASEBOARD_DB_LONG_STATEMENT_TIMEOUT_MS", 60_000, minimum=1
)
LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS = env_int(
    "LEASEBOARD_DB_LONG_LOCK_TIMEOUT_MS", 10_000, minimum=1
)
# The whole request's bound on the database, enforced from this side (a frozen server
# enforces no timeout of its own): under /api/ (and /healthz), below the agent SDK's 2 s
# request timeout so an agent hears 503 rather than timing out; and for pages. 0: none.
LEASEBOARD_API_DEADLINE_MS = env_int("LEASEBOARD_API_DEADLINE_MS", 1800)
LEASEBOARD_PAGE_DEADLINE_MS = env_int("LEASEBOARD_PAGE_DEADLINE_MS", 10_000)
# Retry-After of a 503 `unavailable`; after a connection-level failure a process also
# answers 503 at once for this long (then lets one request try) rather than making every
# request wait out the connect timeout.
LEASEBOARD_DB_RETRY_AFTER_S = float(env_str("LEASEBOARD_DB_RETRY_AFTER_S", "1"))
if not 0.1 <= LEASEBOARD_DB_RETRY_AFTER_S <= 60:
    raise ImproperlyConfigured("LEASEBOARD_DB_RETRY_AFTER_S must be between 0.1 and 60")

DATABASE_URL = os.environ.get("DATABASE_URL", "")
DATABASES = {
    "default": database_from_url(DATABASE_URL, DATA_DIR)
    if DATABASE_URL
    else sqlite_database(str(DATA_DIR / "leaseboard.sqlite3"))
}

# Dashboard pages and exports may read from a streaming replica (leaseboard.core.replicas;
# docs/deployment.md, "High availability"): DATABASE_REPLICA_URL, e.g. HAProxy's port for
# Patroni's replicas. Past LEASEBOARD_REPLICA_MAX_LAG_S of lag they read from the primary;
# writes and every authority decision always do.
DATABASE_REPLICA_URL = os.environ.get("DATABASE_REPLICA_URL", "")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = {
        **database_from_url(DATABASE_REPLICA_URL, DATA_DIR),
        # Tests read the primary's test database through this alias.
        "TEST": {"MIRROR": "default"},
    }
DATABASE_ROUTERS = ["leaseboard.core.replicas.ReplicaRouter"]
LEASEBOARD_REPLICA_MAX_LAG_S = float(env_str("LEASEBOARD_REPLICA_MAX_LAG_S", "5"))
if not 0 <= LEASEBOARD_REPLICA_MAX_LAG_S <= 3600:
    raise ImproperlyConfigured("LEASEBOARD_REPLICA_MAX_LAG_S must be between 0 and 3600")

# Django's test flush TRUNCATEs every table; the audit table's TRUNCATE trigger lets a
# session through only with this setting (docs/audit.md). Never set in production.
if TESTING and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    _opts = DATABASES["default"]["OPTIONS"]
    _opts["options"] = (
        str(_opts.get("options", "")) + " -c leaseboard.audit_truncate=allow"
    ).strip()
