"""A fencing-aware MCP server's check: the fencing token `leaseboard-mcp` puts in a
`tools/call`'s `_meta` (`leaseboard/fencing_token`, `leaseboard/epoch`,
`leaseboard/work_key`), run through the same verifier and epoch guard as the HTTP headers.

    decision = decide_from_meta(verifier, params.meta, content=EffectContent(kind, target, payload))
    if not decision.accepted: return CallToolResult(is_error=True, ...)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leaseboard_recipient.tokens import EffectContent
from leaseboard_recipient.verifier import Decision, TokenVerifier
from leaseboard_recipient.wsgi import (
    EPOCH_HEADER,
    TOKEN_HEADER,
    WORK_KEY_HEADER,
    decide_from_headers,
)

META_KEYS = {
    TOKEN_HEADER: "leaseboard/fencing_token",
    EPOCH_HEADER: "leaseboard/epoch",
    WORK_KEY_HEADER: "leaseboard/work_key",
}


def decide_from_meta(
    verifier: TokenVerifier,
    meta: Mapping[str, Any] | None,
    *,
    cursor: Any = None,
    content: EffectContent | None = None,
) -> Decision:
    """Verify the token of an MCP call and guard its epoch (see decide_from_headers)."""
    given = meta or {}

    def get(header: str) -> str | None:
        value = given.get(META_KEYS[header])
        return None if value is None else str(value)

    return decide_from_headers(verifier, get, cursor=cursor, content=content)
