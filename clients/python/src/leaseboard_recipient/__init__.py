"""Recipient-side fencing: verify Leaseboard's signed tokens and refuse stale epochs.

No Django import at module level; `leaseboard_recipient.django_guard` holds the Django forms.
"""

from __future__ import annotations

from leaseboard_recipient.guard import (
    DEFAULT_TABLE,
    EpochGuard,
    GuardResult,
    InMemoryEpochGuard,
    PostgresEpochGuard,
    RedisEpochGuard,
    check_in,
    schema_sql,
)
from leaseboard_recipient.mcp_meta import decide_from_meta
from leaseboard_recipient.notices import EpochNoticeReceiver, signature_valid
from leaseboard_recipient.online import OnlineAnswer, OnlineChecker
from leaseboard_recipient.reporter import MemoryReporter, RecipientReporter, Refusal, Reporter
from leaseboard_recipient.tokens import EffectContent, content_digest
from leaseboard_recipient.verifier import Decision, TokenVerifier, fetch_jwks, problem_for
from leaseboard_recipient.wsgi import FencingMiddleware, decide_from_headers

__all__ = [
    "DEFAULT_TABLE",
    "Decision",
    "EffectContent",
    "EpochGuard",
    "EpochNoticeReceiver",
    "FencingMiddleware",
    "GuardResult",
    "InMemoryEpochGuard",
    "MemoryReporter",
    "OnlineAnswer",
    "OnlineChecker",
    "PostgresEpochGuard",
    "RecipientReporter",
    "RedisEpochGuard",
    "Refusal",
    "Reporter",
    "TokenVerifier",
    "check_in",
    "content_digest",
    "decide_from_headers",
    "decide_from_meta",
    "fetch_jwks",
    "problem_for",
    "schema_sql",
    "signature_valid",
]
