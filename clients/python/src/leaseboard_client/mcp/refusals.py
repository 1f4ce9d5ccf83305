"""How the gateway answers a call it refuses: an MCP tool error (`isError: true`) whose
text says the stable code and Leaseboard's reason (what an agent reads) and whose `_meta`
holds the problem (what a program reads)."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from leaseboard_client.errors import LeaseError

META_PROBLEM = "leaseboard/problem"
# The problem fields worth a program's while, beside code and detail.
PROBLEM_FIELDS = (
    "current_epoch",
    "your_epoch",
    "effect_id",
    "rule",
    "retry_after_ms",
    "reason",
    "revoked_by",
    "holder_kind",
)


def refusal(error: LeaseError, tool: str) -> types.CallToolResult:
    """A refused call as an MCP tool error: the stable code and Leaseboard's reason in the
    text (what the agent reads) and as a problem in `_meta` (what a program reads)."""
    problem: dict[str, Any] = {"code": error.code, "detail": error.detail}
    problem.update({k: error.problem[k] for k in PROBLEM_FIELDS if k in error.problem})
    text = f"Leaseboard refused {tool} ({error.code}): {error.detail}. The call was not forwarded."
    retry = error.retry_after_s
    if retry is not None:
        text += f" Retry after {retry:g} s."
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=True, _meta={META_PROBLEM: problem}
    )
