"""Waiting for an approver within what MCP offers, never forwarding before the decision.

A `require_approval` rule holds an effect as pending. The gateway asks Leaseboard again
(the same idempotency key answers with the decision) every `approval_poll_s` for up to
`approval_wait_s` inside the call, reporting progress. Then, by what the client supports:

- 2026-07-28 clients get an `InputRequiredResult` (SEP-2322): the first round carries an
  elicitation pointing at the approval page (URL mode, else a form asking whether to
  wait), later rounds only the sealed `request_state`, and the client's retry waits again;
- handshake-era clients with elicitation get one `elicitation/create` (URL or form) per
  effect, then the in-call wait;
- any other client gets a tool error, `approval_required`, "retry after": the same call
  with the same arguments joins the same effect (the gateway keeps its idempotency key).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from leaseboard_client.errors import ApprovalRequired, LeaseError
from leaseboard_client.mcp.refusals import refusal

if TYPE_CHECKING:
    from leaseboard_client.aio import AsyncHolding
    from leaseboard_client.mcp.config import GatewayConfig

INPUT_KEY = "leaseboard_approval"
_WAIT_SCHEMA = {
    "type": "object",
    "properties": {
        "wait": {"type": "boolean", "title": "Wait for the approver's decision", "default": True}
    },
}


@dataclass(frozen=True)
class State:
    """What a retried round carries back (sealed by the SDK's RequestStateBoundary)."""

    key: str
    effect_id: str

    def dump(self) -> str:
        return json.dumps({"key": self.key, "effect": self.effect_id})


@dataclass(frozen=True)
class Pending:
    """An effect waiting for its approver, as it was proposed (to ask again on stop)."""

    key: str
    kind: str
    target: str
    payload: Any


def state_of(params: types.CallToolRequestParams) -> State | None:
    raw = params.request_state
    if not raw:
        return None
    try:
        data = json.loads(raw)
        return State(key=str(data["key"]), effect_id=str(data["effect"]))
    except (ValueError, KeyError, TypeError):
        return None


def _elicitation(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """'url' or 'form' if the client can be asked, else None."""
    caps = ctx.session.client_capabilities
    if caps is None or caps.elicitation is None:
        return None
    if caps.elicitation.url is not None:
        return "url"
    if caps.elicitation.form is not None:
        return "form"
    return "form"  # an empty elicitation capability means form (2025-06-18 clients)


def _declined(params: types.CallToolRequestParams) -> bool | None:
    """The user's answer to our elicitation carried by this round: True if they chose not
    to wait, False if they accepted, None if this round carries none."""
    answer = (params.input_responses or {}).get(INPUT_KEY)
    if not isinstance(answer, types.ElicitResult):
        return None
    if answer.action != "accept":
        return True
    return (answer.content or {}).get("wait") is False


class Wait:
    """One call's wait for the decision on its effect; `next_round` says what to do next."""

    def __init__(
        self,
        config: GatewayConfig,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        state: State | None,
        asked: set[str],
    ) -> None:
        self.config = config
        self.ctx = ctx
        self.params = params
        self.state = state
        self.asked = asked  # effects the user was already told about (one elicitation each)
        self.modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.mode = _elicitation(ctx)
        self.started = time.monotonic()

    async def next_round(
        self, pending: ApprovalRequired, key: str
    ) -> types.CallToolResult | types.InputRequiredResult | None:
        """None: wait a poll interval, then ask Leaseboard again. Otherwise the answer."""
        effect_id = pending.effect_id or ""
        page = self.config.approval_page(effect_id)
        message = (
            f"Leaseboard holds {self.params.name} (effect {effect_id}) for an approver's "
            f"decision{self._rule(pending)}. An approver decides at {page}; the call goes on "
            "only once approved."
        )
        if _declined(self.params):
            return self._refused(
                pending,
                f"{message} You chose not to wait: nothing was forwarded; the effect stays "
                "pending, and the same call later joins it.",
                retry_s=self.config.approval_poll_s,
            )
        state = State(key=key, effect_id=effect_id)
        if self.mode is not None and effect_id not in self.asked:
            self.asked.add(effect_id)
            if self.modern:
                return types.InputRequiredResult(
                    input_requests={INPUT_KEY: self._elicit_request(message, page)},
                    request_state=state.dump(),
                )
            if not await self._elicit_now(message, page, effect_id):
                return self._refused(pending, f"{message} You chose not to wait.", retry_s=None)
        elapsed = time.monotonic() - self.started
        budget = self.config.approval_wait_s
        if elapsed < budget:
            await self.ctx.session.report_progress(
                elapsed, budget, f"waiting for an approver to decide effect {effect_id}"
            )
            await anyio.sleep(min(self.config.approval_poll_s, budget - elapsed))
            return None
        if self.modern:
            return types.InputRequiredResult(request_state=state.dump())  # ask again
        return self._refused(
            pending,
            f"{message} Waited {budget:g} s; retry this call (same arguments) to learn the "
            "decision.",
            retry_s=self.config.approval_poll_s,
        )

    def _refused(
        self, pending: ApprovalRequired, detail: str, *, retry_s: float | None
    ) -> types.CallToolResult:
        problem = dict(pending.problem)
        if retry_s is not None:
            problem["retry_after_ms"] = round(retry_s * 1000)
        error = ApprovalRequired(detail, status=pending.status, problem=problem)
        return refusal(error, self.params.name)

    @staticmethod
    def _rule(pending: ApprovalRequired) -> str:
        rule = pending.problem.get("rule")
        return f" (rule {rule!r})" if rule else ""

    def _elicit_request(self, message: str, page: str) -> types.ElicitRequest:
        if self.mode == "url":
            return types.ElicitRequest(
                params=types.ElicitRequestURLParams(message=message, url=page)
            )
        return types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=_WAIT_SCHEMA)
        )

    async def _elicit_now(self, message: str, page: str, effect_id: str) -> bool:
        """Handshake era: ask the user once; False if they chose not to wait."""
        session = self.ctx.session
        try:
            if self.mode == "url":
                result = await session.elicit_url(
                    message, page, effect_id, related_request_id=self.ctx.request_id
                )
                return result.action == "accept"
            result = await session.elicit_form(
                message, _WAIT_SCHEMA, related_request_id=self.ctx.request_id
            )
        except (MCPError, RuntimeError):
            return True  # the client could not ask: keep waiting as if it had not been asked
        return result.action == "accept" and (result.content or {}).get("wait") is not False


async def withdraw(holding: AsyncHolding, pending: Pending) -> None:
    """At stop: an effect approved after its caller stopped waiting was never forwarded;
    report it failed so nobody has to reconcile it. Still pending: nothing to do (the
    approval's deadline decides it)."""
    try:
        decision = await holding.client.propose_effect(
            holding.lease_id,
            holding.epoch,
            pending.kind,
            pending.target,
            idempotency_key=pending.key,
            payload=pending.payload,
        )
        if decision.authorized:
            await holding.client.report_outcome(
                decision.effect_id,
                "failed",
                "not attempted: approved after the caller stopped waiting; the gateway stopped",
            )
    except LeaseError:
        pass  # refused, or unreachable: nothing was forwarded either way
