"""`leaseboard-mcp --config FILE`: the gateway as an MCP server, over stdio (the default) or
streamable HTTP, built on the official SDK's low-level `Server`.

Why the low-level server and not fastmcp's proxy: the gateway must own every `tools/call`
whole — its raw `_meta` (the client's trace context in, the fencing token out), its
`input_responses`/`request_state` (the approval rounds), and its answer, which may be an
`InputRequiredResult` — and the low-level `on_call_tool` hands over exactly that, with the
SDK's OpenTelemetry middleware (MCP semantic conventions) and `RequestStateBoundary`
(sealed request state) on by construction. fastmcp 4 is built on this same SDK and would
add some twenty dependencies (authlib, cyclopts, rich, websockets, ...) to a client extra
while re-wrapping upstream tools as its own objects, which is the part we must control.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server

from leaseboard_client.mcp.config import ConfigError, GatewayConfig, load_config
from leaseboard_client.mcp.gateway import Gateway, MissingTool
from leaseboard_client.mcp.upstreams import GatewayStartError, warn
from leaseboard_client.telemetry import TelemetryError, tracing_setup
from leaseboard_client.version import __version__

NAME = "leaseboard-mcp"
INSTRUCTIONS = (
    "Tools behind this server act under a Leaseboard lease: a call that would act without "
    "standing (revoked, expired, taken over, on hold, waiting for an approver) is refused "
    "with a tool error naming the reason; nothing was done. Do not retry a refusal blindly."
)


def build_server(gateway: Gateway) -> Server[Any]:
    """The MCP server in front of the gateway; its lifespan starts and stops the gateway
    (once per process, on stdio and on HTTP alike)."""

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            await gateway.start(stack)
            yield {}

    server: Server[Any] = Server(
        NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        on_list_tools=gateway.list_tools,
        on_call_tool=gateway.call_tool,
    )
    # The approval rounds' request_state is sealed and bound to the tool and its arguments.
    security = RequestStateSecurity.ephemeral(ttl=max(600.0, gateway.config.approval_wait_s * 20))
    server.middleware.append(RequestStateBoundary(security, default_audience=NAME))
    return server


async def serve(config: GatewayConfig, *, token: str) -> None:
    gateway = Gateway(config, token=token)
    server = build_server(gateway)
    if config.serve.transport == "http":
        import uvicorn

        app = server.streamable_http_app(
            streamable_http_path=config.serve.path, host=config.serve.host
        )
        await uvicorn.Server(
            uvicorn.Config(app, host=config.serve.host, port=config.serve.port, log_level="warning")
        ).serve()
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()  # stdin closed: the client is gone


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    # SIGTERM and SIGINT unwind the lifespan (the lease is released) instead of killing.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=NAME, description="A fencing MCP gateway: tool calls act under a Leaseboard lease."
    )
    parser.add_argument("--config", required=True, help="the gateway's TOML file")
    parser.add_argument("--transport", choices=("stdio", "http"), help="overrides serve.transport")
    parser.add_argument("--host", help="overrides serve.host (http)")
    parser.add_argument("--port", type=int, help="overrides serve.port (http)")
    parser.add_argument(
        "--check", action="store_true", help="check the configuration and the token, then exit"
    )
    parser.add_argument("--version", action="version", version=f"{NAME} {__version__}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        config = load_config(args.config)
        token = config.token()
    except ConfigError as exc:
        warn(f"configuration: {exc}")
        return 2
    overrides = {k: v for k in ("transport", "host", "port") if (v := getattr(args, k))}
    if overrides:
        from dataclasses import replace

        config = replace(config, serve=replace(config.serve, **overrides))
    if args.check:
        counts = f"{len(config.upstreams)} upstream(s), {len(config.tools)} mapped tool(s)"
        print(f"{args.config}: ok ({counts})")
        return 0
    try:
        tracing_setup(NAME)
    except TelemetryError as exc:
        warn(f"telemetry: {exc}")
        return 2
    try:
        anyio.run(functools.partial(serve, config, token=token))
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # the start's own errors may come wrapped in groups
        failure = _start_failure(exc)
        if failure is None:
            raise
        warn(str(failure))
        return 1
    return 0


def _start_failure(exc: BaseException) -> BaseException | None:
    if isinstance(exc, GatewayStartError | MissingTool):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _start_failure(inner)
            if found is not None:
                return found
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
