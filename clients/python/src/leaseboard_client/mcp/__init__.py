"""`leaseboard-mcp`: a fencing MCP gateway in front of upstream MCP servers (extra [mcp]).

Tool calls mapped to effects are proposed to Leaseboard and forwarded only when authorized,
with the effect's fencing token in the call's `_meta`; see docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401  (the official MCP SDK, v2)
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "leaseboard_client.mcp needs the MCP SDK: pip install 'leaseboard-client[mcp]'"
    ) from exc

from leaseboard_client.mcp.config import ConfigError, GatewayConfig, ToolEffect, load_config
from leaseboard_client.mcp.gateway import (
    META_EFFECT,
    META_EPOCH,
    META_TOKEN,
    META_WORK_KEY,
    Gateway,
)
from leaseboard_client.mcp.refusals import META_PROBLEM
from leaseboard_client.mcp.server import build_server, main

__all__ = [
    "META_EFFECT",
    "META_EPOCH",
    "META_PROBLEM",
    "META_TOKEN",
    "META_WORK_KEY",
    "ConfigError",
    "Gateway",
    "GatewayConfig",
    "ToolEffect",
    "build_server",
    "load_config",
    "main",
]
