"""A tiny upstream MCP server for the gateway's tests (run as a subprocess over stdio): its
one tool, `echo_meta`, answers with the `_meta` its call arrived with, as JSON text, so a
test can verify the fencing token and trace context the gateway forwarded."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="echo_meta",
                description="Answers with the _meta of the call",
                input_schema={"type": "object", "properties": {"note": {"type": "string"}}},
            )
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    meta = {k: v for k, v in (params.meta or {}).items() if not k.startswith("io.")}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(meta))])


async def main() -> None:
    server: Server[Any] = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
