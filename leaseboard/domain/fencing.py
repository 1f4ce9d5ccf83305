"""The server's side of fencing tokens: the format, and when a token it issues dies.

The token format (claims, signing, verification, JWKS) is defined once, in
`leaseboard_recipient.tokens`, which ships to recipients in the leaseboard-client
distribution (clients/python); the server signs and checks with that same code.
"""

from __future__ import annotations

# deliberate: the names re-exported one a line (and in __all__), so a reader, grep and mypy
# see each; a test importing several of them lists them alike.
from leaseboard_recipient.tokens import (
    INVALID_TOKEN_CODES,
    KEY_BYTES,
    MAX_TOKEN_CHARS,
    SIGNATURE_BYTES,
    TOKEN_VERSION,
    EffectContent,
    FencingClaims,
    InvalidToken,
    canonical_json,
    content_checked,
    content_digest,
    generate_private_key,
    jwks,
    key_id,
    public_key_raw,
    public_keys_from_jwks,
    sign_token,
    unverified_claims,
    verify_token,
)

__all__ = [
    "INVALID_TOKEN_CODES",
    "KEY_BYTES",
    "MAX_TOKEN_CHARS",
    "SIGNATURE_BYTES",
    "TOKEN_VERSION",
    "EffectContent",
    "FencingClaims",
    "InvalidToken",
    "canonical_json",
    "content_checked",
    "content_digest",
    "generate_private_key",
    "jwks",
    "key_id",
    "public_key_raw",
    "public_keys_from_jwks",
    "sign_token",
    "token_expiry_ms",
    "unverified_claims",
    "verify_token",
]


def token_expiry_ms(*, lease_expires_at_ms: int, now_ms: int, max_ttl_ms: int) -> int:
    """When a token issued now dies: when the lease would have expired at the moment of
    issue, never later (a renewal does not stretch a token already issued), and never more
    than `max_ttl_ms` after issue."""
    return min(lease_expires_at_ms, now_ms + max_ttl_ms)
