"""Keys kept outside the database: the audit log's HMAC key and its checkpoints
(docs/audit.md), and the key-encryption key of the fencing-token signing keys
(docs/deployment.md, "Fencing keys").
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import (
    env_int,
    env_keys,
    env_str,
)
from leaseboard.settings.base import DATA_DIR, DEBUG, TESTING
from leaseboard.settings.database import DATABASES

# --- Audit log integrity (docs/audit.md) ----------------------------------------------
# Entries are chained with an HMAC whose key lives outside the database: the current key
# from LEASEBOARD_AUDIT_KEY, or the first line of the file LEASEBOARD_AUDIT_KEY_FILE (later
# lines: retired keys, kept to verify older entries). Required with DEBUG off on
# PostgreSQL; in DEBUG, tests and the embedded SQLite mode (where the database is a file
# beside DATA_DIR anyway) a key is generated into DATA_DIR. Keys are 32+ characters.
AUDIT_KEY_MIN_CHARS = 32


# Where a secret key may be generated into DATA_DIR rather than required.
KEYS_MAY_BE_GENERATED = DEBUG or TESTING or DATABASES["default"]["ENGINE"].endswith("sqlite3")


def _audit_keys() -> tuple[str, tuple[str, ...]]:
    # deliberate: env_keys (envconf.py) called with this key's own names, file and message;
    # the fencing KEK's call below is alike in shape only.
    return env_keys(
        "LEASEBOARD_AUDIT_KEY",
        retired_name="LEASEBOARD_AUDIT_RETIRED_KEYS",
        generated=DATA_DIR / "audit-key" if KEYS_MAY_BE_GENERATED else None,
        what="an audit key",
        min_chars=AUDIT_KEY_MIN_CHARS,
        missing=(
            "LEASEBOARD_AUDIT_KEY (or LEASEBOARD_AUDIT_KEY_FILE) is required with DEBUG off "
            "on PostgreSQL: the audit log's MAC key must live outside the database "
            "(generate one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        ),
    )


LEASEBOARD_AUDIT_KEY, LEASEBOARD_AUDIT_RETIRED_KEYS = _audit_keys()
# Signed checkpoints {seq, head, count, at} are appended here, outside the database.
LEASEBOARD_AUDIT_CHECKPOINT_DIR = Path(
    env_str("LEASEBOARD_AUDIT_CHECKPOINT_DIR", str(DATA_DIR / "audit-checkpoints"))
)
# How often beat runs `audit_checkpoint` (0: not from beat; run it from cron where the
# checkpoint directory lives instead).
LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S = env_int("LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S", 300)
if 0 < LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S < 10:
    raise ImproperlyConfigured("LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S must be 0 or at least 10")
# How old an entry may be and still be covered by no checkpoint before `verify_audit` says
# checkpoints are missing (0: two intervals and a minute, or 26 h when cron writes them).
LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S = env_int("LEASEBOARD_AUDIT_CHECKPOINT_GRACE_S", 0)

# --- Fencing-token signing keys (docs/deployment.md, "Fencing keys") -------------------
# Ed25519 keys live in the database (one key set for every web process), their private
# halves sealed with AES-256-GCM under a key-encryption key (KEK) that is not in it: from
# LEASEBOARD_FENCING_KEK, or the first line of LEASEBOARD_FENCING_KEK_FILE (later lines:
# retired KEKs, kept to open keys sealed before a KEK rotation). Required with DEBUG off on
# PostgreSQL; in DEBUG, tests and the embedded SQLite mode one is generated into DATA_DIR.
FENCING_KEK_MIN_CHARS = 32


def _fencing_keks() -> tuple[str, tuple[str, ...]]:
    if os.environ.get("LEASEBOARD_FENCING_KEY_DIR"):
        # An earlier release named this setting but never read it: refuse rather than let
        # an operator believe the private keys are kept in that directory.
        raise ImproperlyConfigured(
            "LEASEBOARD_FENCING_KEY_DIR is not used: fencing private keys are kept in the "
            "database, sealed with LEASEBOARD_FENCING_KEK; unset it and set that instead"
        )
    # deliberate: as the audit key's call above: this key's own names, file and message.
    return env_keys(
        "LEASEBOARD_FENCING_KEK",
        retired_name="LEASEBOARD_FENCING_RETIRED_KEKS",
        generated=DATA_DIR / "fencing-kek" if KEYS_MAY_BE_GENERATED else None,
        what="a key-encryption key",
        min_chars=FENCING_KEK_MIN_CHARS,
        missing=(
            "LEASEBOARD_FENCING_KEK (or LEASEBOARD_FENCING_KEK_FILE) is required with DEBUG "
            "off on PostgreSQL: fencing private keys are sealed with it, so it must live "
            "outside the database (generate one with: "
            "python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        ),
    )


LEASEBOARD_FENCING_KEK, LEASEBOARD_FENCING_RETIRED_KEKS = _fencing_keks()
# A rotated key is published at once but signs only after this delay, so recipients fetch
# it before they meet a token signed by it. Default: twice the recipient verifier's
# shortest JWKS refresh interval (30 s, leaseboard_recipient/verifier.py).
LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS = env_int(
    "LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS", 60_000, minimum=0
)
