"""The upstream MCP servers behind the gateway: started as subprocesses over stdio with the
official SDK's client, their tools listed once, and each call forwarded with a bounded wait
and its outcome read for Leaseboard (applied, failed, or unknown).

What an outcome means: the upstream's own `isError` says the tool ran and failed; a
JSON-RPC refusal of the request itself (bad params, unknown method) says it never ran;
a timeout or a dropped connection says nothing — the tool may or may not have acted.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from leaseboard_client.mcp.config import UpstreamConfig

log = logging.getLogger("leaseboard_client.mcp")

# JSON-RPC errors that refuse the request before the tool runs: nothing happened.
NEVER_RAN = frozenset(
    {types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND, types.INVALID_PARAMS}
)
DETAIL_CHARS = 1000  # the server's bound on an outcome's detail


class GatewayStartError(RuntimeError):
    """An upstream could not be started or its tools do not fit the configuration."""


@dataclass(frozen=True)
class Route:
    """Where an exposed tool goes: its upstream and the upstream's own name for it."""

    upstream: Upstream
    name: str
    tool: types.Tool


@dataclass(frozen=True)
class Forwarded:
    """What a forwarded call came to: the upstream's result (None if there was none), and
    the outcome to report with a detail for humans."""

    result: types.CallToolResult | None
    outcome: str  # applied | failed | unknown
    detail: str = ""


class Upstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self.client: Client | None = None

    @property
    def name(self) -> str:
        return self.config.name

    async def start(self, stack: AsyncExitStack) -> list[types.Tool]:
        params = StdioServerParameters(
            command=self.config.command[0],
            args=list(self.config.command[1:]),
            env=dict(self.config.env) or None,
            cwd=self.config.cwd,
        )
        try:
            self.client = await stack.enter_async_context(Client(params))
        except (OSError, MCPError) as exc:
            raise GatewayStartError(
                f"upstream {self.name!r} ({' '.join(self.config.command)}) did not start: {exc}"
            ) from exc
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang the start
            page = await self.client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(
        self, name: str, arguments: Mapping[str, Any], meta: dict[str, Any]
    ) -> Forwarded:
        """Forward one call; never raises for what the upstream did (it is an outcome)."""
        assert self.client is not None
        try:
            result = await self.client.call_tool(
                name,
                dict(arguments),
                read_timeout_seconds=self.config.timeout_s,
                meta=meta or None,  # type: ignore[arg-type]
            )
        except MCPError as exc:
            if exc.code in NEVER_RAN:
                return Forwarded(None, "failed", f"the upstream refused the call: {exc}")
            return Forwarded(
                None, "unknown", f"the upstream may or may not have acted: {exc}"[:DETAIL_CHARS]
            )
        except (TimeoutError, OSError, RuntimeError) as exc:
            return Forwarded(
                None, "unknown", f"the upstream may or may not have acted: {exc!r}"[:DETAIL_CHARS]
            )
        if result.is_error:
            return Forwarded(result, "failed", result_text(result)[:DETAIL_CHARS])
        return Forwarded(result, "applied", "")


def result_text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent)).strip()


class Upstreams:
    """Every upstream, and the tools they offer under the names the gateway exposes."""

    def __init__(self, configs: tuple[UpstreamConfig, ...]) -> None:
        self.upstreams = [Upstream(c) for c in configs]
        self.routes: dict[str, Route] = {}

    async def start(self, stack: AsyncExitStack) -> None:
        for upstream in self.upstreams:
            for tool in await upstream.start(stack):
                exposed = upstream.config.prefix + tool.name
                if exposed in self.routes:
                    other = self.routes[exposed].upstream.name
                    raise GatewayStartError(
                        f"tool {exposed!r} is offered by upstreams {other!r} and "
                        f"{upstream.name!r}: give one of them a prefix"
                    )
                shown = tool if exposed == tool.name else tool.model_copy(update={"name": exposed})
                self.routes[exposed] = Route(upstream=upstream, name=tool.name, tool=shown)
            log.info("upstream %s: %d tools", upstream.name, len(self.routes))

    def route(self, name: str) -> Route | None:
        return self.routes.get(name)

    def tools(self) -> list[types.Tool]:
        return [r.tool for r in self.routes.values()]


def warn(message: str) -> None:
    """A line for the operator on stderr (stdout is the MCP channel on stdio)."""
    print(f"leaseboard-mcp: {message}", file=sys.stderr, flush=True)
