"""The fencing gateway: one work item's lease held for a session of MCP tool calls.

Start: start the upstreams, admit the work item, acquire it (renewed in the background by
the SDK's asyncio renewer). Each mapped `tools/call`: refuse locally in jeopardy or on hold;
propose the effect (Leaseboard records it and binds the decision to the content's digest);
forward only when authorized, with the effect's fencing token in the call's `_meta`; report
the outcome. A `require_approval` decision waits for the approver (leaseboard_client.mcp
.approvals). A refusal is a tool error with the stable code and Leaseboard's reason. Stop:
release the lease. A lost lease stays lost for this process: the gateway never takes the
work back by itself after a revoke, a takeover or an expiry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from leaseboard_client.aio import AsyncClient, AsyncEffectScope, AsyncHolding
from leaseboard_client.errors import (
    TERMINAL_CODES,
    ApprovalRequired,
    LeaseError,
    TransientError,
    ValidationError,
)
from leaseboard_client.mcp import approvals
from leaseboard_client.mcp.config import GatewayConfig, MissingArgument
from leaseboard_client.mcp.refusals import refusal
from leaseboard_client.mcp.upstreams import Forwarded, Route, Upstreams, warn
from leaseboard_client.timing import TimingError

log = logging.getLogger("leaseboard_client.mcp")

# `_meta` keys the gateway adds to a forwarded call (a fencing-aware upstream reads them:
# leaseboard_recipient.mcp_meta), and to its answers.
META_TOKEN = "leaseboard/fencing_token"
META_EPOCH = "leaseboard/epoch"
META_WORK_KEY = "leaseboard/work_key"
META_EFFECT = "leaseboard/effect_id"
META_IDEMPOTENCY = "leaseboard/idempotency_key"  # a client may name its retries
# Keys of the inbound `_meta` that belong to the hop they came on, never forwarded: the
# protocol's own, the progress token, trace context (the SDK injects the current one), and
# anything claiming to be Leaseboard's (a client must not hand the upstream a token).
_HOP_PREFIXES = ("io.modelcontextprotocol/", "leaseboard/")
_HOP_KEYS = frozenset({"progressToken", "traceparent", "tracestate", "baggage"})


def call_digest(name: str, arguments: Mapping[str, Any]) -> str:
    """Which call this is, for retries: the same tool with the same arguments."""
    body = json.dumps({"n": name, "a": arguments}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def forwarded_meta(inbound: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client's own `_meta` entries, without the ones that belong to its hop."""
    return {
        k: v
        for k, v in (inbound or {}).items()
        if k not in _HOP_KEYS and not k.startswith(_HOP_PREFIXES)
    }


def _note(span: Span, **attributes: Any) -> None:
    span.set_attributes({f"leaseboard.{k}": v for k, v in attributes.items() if v is not None})


def _refused_span(span: Span, error: LeaseError) -> None:
    _note(span, decision="refused", code=error.code, effect_id=error.effect_id)
    rule = error.problem.get("rule")
    if rule:
        _note(span, policy_rule=str(rule))
    span.set_attribute("error.type", error.code)
    span.set_status(StatusCode.ERROR, error.code)


class Gateway:
    """The gateway's state for one process: the configuration, the Leaseboard client, the
    holding, the upstreams, and the calls waiting for an approver (by call digest, so a
    retried call finds its effect again)."""

    def __init__(self, config: GatewayConfig, *, token: str, transport: Any = None) -> None:
        self.config = config
        self.client = AsyncClient(config.server, token, timing=config.timing, transport=transport)
        self.upstreams = Upstreams(config.upstreams)
        self.holding: AsyncHolding | None = None
        self.acquire_error: LeaseError | None = None
        self.admitted = False
        self.pending: dict[str, approvals.Pending] = {}  # call digest -> its waiting effect
        self.asked: set[str] = set()  # effects a user was asked to wait for
        self._acquiring = anyio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, stack: AsyncExitStack) -> None:
        """Upstreams first (a gateway that cannot forward should not hold the work), then
        admit and acquire. An acquire refused now (held by another, a lock delay) is tried
        again on the next mapped call; the gateway serves meanwhile."""
        stack.push_async_callback(self.client.aclose)
        await self.upstreams.start(stack)
        unknown = sorted(set(self.config.tools) - set(self.upstreams.routes))
        if unknown:
            raise MissingTool(f"tools.{unknown[0]} is mapped but no upstream offers it")
        stack.push_async_callback(self.stop)
        await self._acquire(wait_s=self.config.acquire_wait_s)

    async def _acquire(self, *, wait_s: float) -> None:
        """Admit (harmless when admitted already: an existing key answers its state), then
        acquire; a failure of either is kept and tried again on the next mapped call."""
        if not self.admitted:
            try:
                admission = await self.client.admit(
                    self.config.work_key, self.config.queue, title=self.config.title
                )
                self.admitted = admission.admission == "admitted"
                if not self.admitted:
                    where = f"{self.config.work_key!r} in {self.config.queue!r}"
                    warn(f"{where} is {admission.admission}")
            except LeaseError as exc:
                warn(f"could not admit {self.config.work_key!r}: {exc}")
        try:
            self.holding = await self.client.hold(
                self.config.work_key, ttl_ms=self.config.ttl_ms, wait_s=wait_s, on_lost=_on_lost
            )
            self.acquire_error = None
            warn(f"holding {self.config.work_key!r} at epoch {self.holding.epoch}")
        except LeaseError as exc:
            self.acquire_error = exc
            warn(f"could not acquire {self.config.work_key!r}: {exc}")
        except TimingError as exc:  # the queue's ttl is too short for this gateway's timing
            self.acquire_error = ValidationError(f"the lease's timing: {exc}", code="timing")
            warn(f"released {self.config.work_key!r} at once: {exc}")

    async def stop(self) -> None:
        """Settle the effects still waiting for an approver (one approved meanwhile was
        never forwarded: say so, or a human would have to reconcile it), then release."""
        holding = self.holding
        if holding is None:
            return
        for pending in list(self.pending.values()):
            await approvals.withdraw(holding, pending)
        self.pending.clear()
        try:
            await holding.release()
        except LeaseError as exc:
            warn(f"release of {self.config.work_key!r} failed (it will expire): {exc}")

    async def standing(self) -> AsyncHolding:
        """The holding to act under; acquired now if the start could not (never again once
        held: a lost lease stays lost)."""
        if self.holding is not None:
            return self.holding
        async with self._acquiring:
            if self.holding is None:
                await self._acquire(wait_s=0.0)
        if self.holding is None:
            assert self.acquire_error is not None
            raise self.acquire_error
        return self.holding

    # -- MCP handlers --------------------------------------------------------------------------

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = self.upstreams.tools()
        if self.config.deny_unmapped:
            tools = [t for t in tools if t.name in self.config.tools]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, arguments = params.name, params.arguments or {}
        route = self.upstreams.route(name)
        if route is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "extension",
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": ctx.protocol_version,
            "leaseboard.work_key": self.config.work_key,
        }
        if route.tool.description:
            attributes["gen_ai.tool.description"] = route.tool.description[:500]
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = str(ctx.request_id)
        tracer = trace.get_tracer_provider().get_tracer("leaseboard_client.mcp")
        with tracer.start_as_current_span(
            f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes
        ) as span:
            mapping = self.config.tools.get(name)
            if mapping is None:
                if self.config.deny_unmapped:
                    error = LeaseError(
                        f"{name} is not mapped to an effect and this gateway denies unmapped tools",
                        code="tool_not_mapped",
                    )
                    _refused_span(span, error)
                    return refusal(error, name)
                _note(span, decision="passthrough")
                forwarded = await route.upstream.call(
                    route.name, arguments, forwarded_meta(ctx.meta)
                )
                return self._answer(forwarded, span)
            try:
                kind, target, payload = mapping.content(arguments)
            except MissingArgument as exc:
                error = ValidationError(f"{name}: {exc} (see tools.{name} in the config)")
                _refused_span(span, error)
                return refusal(error, name)
            _note(span, effect_kind=kind)
            return await self._effect(ctx, params, route, span, kind, target, payload)

    # -- one mapped call ------------------------------------------------------------------------

    async def _effect(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        route: Route,
        span: Span,
        kind: str,
        target: str,
        payload: Any,
    ) -> types.CallToolResult | types.InputRequiredResult:
        name, arguments = params.name, params.arguments or {}
        digest = call_digest(name, arguments)
        state = approvals.state_of(params)
        client_key = (ctx.meta or {}).get(META_IDEMPOTENCY)
        key = (
            (state.key if state else None)
            or (self.pending[digest].key if digest in self.pending else None)
            or (str(client_key)[:200] if client_key else None)
            or uuid.uuid4().hex
        )
        try:
            holding = await self.standing()
        except LeaseError as exc:
            _refused_span(span, exc)
            return refusal(exc, name)
        _note(span, epoch=holding.epoch, lease_id=holding.lease_id)
        if holding.lost is not None:
            return await self._record_refusal(holding, span, name, kind, target, payload, key)
        waited = approvals.Wait(self.config, ctx, params, state, self.asked)
        while True:
            scope = AsyncEffectScope(holding, kind, target, idempotency_key=key, payload=payload)
            try:
                async with scope as fx:
                    _note(span, decision="authorized", effect_id=fx.effect_id)
                    meta = forwarded_meta(ctx.meta) | self._fencing_meta(fx, holding)
                    forwarded = await route.upstream.call(route.name, arguments, meta)
                    fx.set_outcome(forwarded.outcome, forwarded.detail)
            except ApprovalRequired as exc:
                self.pending[digest] = approvals.Pending(key, kind, target, payload)
                _note(span, decision="pending_approval", effect_id=exc.effect_id)
                rule = exc.problem.get("rule")
                if rule:
                    _note(span, policy_rule=str(rule))
                answer = await waited.next_round(exc, key)
                if answer is None:
                    continue  # waited a poll interval: ask Leaseboard again
                return answer
            except LeaseError as exc:
                self.pending.pop(digest, None)
                _refused_span(span, exc)
                return refusal(exc, name)
            self.pending.pop(digest, None)
            if scope.report_error is not None:
                warn(f"outcome of effect {scope.effect_id} not reported: {scope.report_error}")
            return self._answer(forwarded, span, scope)

    async def _record_refusal(
        self,
        holding: AsyncHolding,
        span: Span,
        name: str,
        kind: str,
        target: str,
        payload: Any,
        key: str,
    ) -> types.CallToolResult:
        """The lease is gone (Leaseboard said so): propose anyway, so that the attempt is on
        the work item's page with the server's own refusal, then refuse. Terminal states
        never come back, so this cannot be authorized; if the server cannot be reached the
        local verdict stands."""
        lost = holding.lost
        assert lost is not None
        try:
            decision = await self.client.propose_effect(
                holding.lease_id, holding.epoch, kind, target, idempotency_key=key, payload=payload
            )
        except TransientError:
            error = lost
        except LeaseError as exc:
            error = exc if exc.code in TERMINAL_CODES else lost
        else:  # not reachable by the server's rules; never forward on it
            if decision.authorized:
                await self.client.report_outcome(
                    decision.effect_id, "failed", "not forwarded: the gateway's lease was lost"
                )
            error = lost
        _refused_span(span, error)
        return refusal(error, name)

    def _fencing_meta(self, fx: AsyncEffectScope, holding: AsyncHolding) -> dict[str, Any]:
        """What a fencing-aware upstream verifies: the effect's token (refused here if it
        may have died, which raises a LeaseError), its epoch, work item and effect id."""
        headers = fx.headers()
        return {
            META_TOKEN: headers["X-Fencing-Token"],
            META_EPOCH: holding.epoch,
            META_WORK_KEY: holding.work_key,
            META_EFFECT: fx.effect_id,
        }

    def _answer(
        self, forwarded: Forwarded, span: Span, scope: AsyncEffectScope | None = None
    ) -> types.CallToolResult:
        _note(span, outcome=forwarded.outcome if scope is not None else None)
        if forwarded.result is None:
            span.set_attribute("error.type", "upstream_" + forwarded.outcome)
            span.set_status(StatusCode.ERROR, forwarded.detail[:200])
            text = f"The upstream did not answer the call ({forwarded.outcome}): {forwarded.detail}"
            if forwarded.outcome == "unknown":
                text += " Leaseboard records the outcome as unknown; a human will reconcile it."
            result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        else:
            result = forwarded.result
            if result.is_error:
                span.set_attribute("error.type", "tool_error")
                span.set_status(StatusCode.ERROR)
        if scope is not None and scope.effect_id is not None:
            meta = dict(result.meta or {})
            meta[META_EFFECT] = scope.effect_id
            result = result.model_copy(update={"meta": meta})
        return result


class MissingTool(RuntimeError):
    """A mapped tool that no upstream offers (a typo in the config, most likely)."""


def _on_lost(holding: AsyncHolding, error: LeaseError) -> None:
    warn(f"lease on {holding.work_key!r} (epoch {holding.epoch}) lost: {error}")
