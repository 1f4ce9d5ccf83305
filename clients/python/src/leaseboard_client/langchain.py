"""LangChain tools whose calls are effects under a Leaseboard lease (extra `[langchain]`).

    async def refund(invoice: str, amount_cents: int, fx: Effect) -> str:
        '''Refund part of an invoice.'''
        await payments.post("/refunds", headers=fx.headers(), json=...)
        return "refunded"

    tool = effect_tool(holding, refund, kind="payment.refund", target="invoice")

Each call of the tool (from LangGraph's ToolNode, a LangChain agent, or `tool.ainvoke` with
a model's tool call) runs `holding.effect(...)`: the effect is proposed first, with the
model's tool-call id as its idempotency key and the call's arguments as its payload, and the
function runs only if it was authorized, with `fx` for the recipient. Its outcome is
reported when it returns or raises. A refusal — standing uncertain (local jeopardy, server
jeopardy), policy, an approver's hold, a lock delay — never runs the function and comes back
to the model as an error ToolMessage saying why. Losing the lease for good (revoked, stale
epoch, expired) stops the run: the LeaseLost error propagates out of the agent, as guarded
work must stop at once (`stop_on_loss=False` reports it to the model instead).

LangChain is imported only here; `import leaseboard_client` never needs it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from langchain_core.tools import InjectedToolCallId, StructuredTool, ToolException
from langchain_core.tools.base import create_schema_from_function
from pydantic import BaseModel, create_model
from pydantic_core import to_jsonable_python

from leaseboard_client.aio import AsyncHolding
from leaseboard_client.errors import (
    ApprovalRequired,
    InJeopardy,
    LeaseError,
    LeaseLost,
    LocalJeopardy,
    LockDelay,
    TransientError,
)
from leaseboard_client.holding import Holding

__all__ = ["effect_tool", "refusal_message", "tool_arguments"]

EFFECT_PARAM = "fx"


def tool_arguments(args: Mapping[str, Any]) -> Any:
    """The default payload of an effect: the tool call's arguments, as JSON."""
    return to_jsonable_python(dict(args))


def refusal_message(error: LeaseError, *, work_key: str) -> str:
    """What the model is told when Leaseboard refuses a tool call (nothing was attempted)."""
    if isinstance(error, ApprovalRequired):
        return (
            f"Not done: Leaseboard holds this effect for a human approver (effect "
            f"{error.effect_id}). Do not retry it now; report that it awaits approval."
        )
    if isinstance(error, LocalJeopardy | InJeopardy):
        return (
            f"Refused ({error.code}): this agent's standing on {work_key!r} is uncertain, so "
            "the effect was not attempted. Do not retry it now."
        )
    if isinstance(error, LeaseLost):
        return (
            f"Refused ({error.code}): this agent no longer holds {work_key!r}; the effect was "
            "not attempted. Stop working on it."
        )
    if isinstance(error, LockDelay):
        wait = error.retry_after_s
        after = f" after {wait:.1f} s" if wait is not None else " later"
        return f"Refused ({error.code}): try again{after}; the effect was not attempted."
    if isinstance(error, TransientError):
        return f"Leaseboard could not be reached ({error.code}); the effect was not attempted."
    return f"Refused by Leaseboard ({error.code}): {error.detail}"


def _target_of(target: str | Callable[[Mapping[str, Any]], str]) -> Callable[..., str]:
    if callable(target):
        return target
    return lambda args: str(args[target])


def effect_tool(
    holding: AsyncHolding | Holding,
    func: Callable[..., Any],
    *,
    kind: str,
    target: str | Callable[[Mapping[str, Any]], str],
    payload: Callable[[Mapping[str, Any]], Any] | None = tool_arguments,
    name: str | None = None,
    description: str | None = None,
    stop_on_loss: bool = True,
) -> StructuredTool:
    """A LangChain tool running `func` as an effect of `kind` under `holding`.

    `func` takes the tool's arguments and the effect as `fx` (hidden from the model); it is
    a coroutine function for an AsyncHolding, a plain one for a sync Holding. `target` names
    the argument the effect acts on, or computes it from the arguments; `payload` makes the
    effect's payload from them (default: the arguments, so policy rules can read amounts).
    """
    if EFFECT_PARAM not in inspect.signature(func).parameters:
        raise TypeError(f"{func.__name__} must take the effect as a parameter named 'fx'")
    is_async = inspect.iscoroutinefunction(func)
    if isinstance(holding, AsyncHolding) != is_async:
        raise TypeError(
            "an AsyncHolding runs coroutine functions and a sync Holding plain ones; "
            f"{func.__name__} is {'a coroutine function' if is_async else 'not async'}"
        )
    tool_name = name or func.__name__
    arguments = create_schema_from_function(
        f"{tool_name}_arguments", func, filter_args=[EFFECT_PARAM]
    )
    if not (isinstance(arguments, type) and issubclass(arguments, BaseModel)):
        raise TypeError(f"{func.__name__}'s annotations must make a pydantic v2 schema")
    # The model never sees the tool-call id; LangChain injects it, and it keys the effect.
    schema: type[BaseModel] = create_model(
        f"{tool_name}_call",
        __base__=arguments,
        tool_call_id=(Annotated[str, InjectedToolCallId], ...),
    )
    target_of = _target_of(target)

    def effect_args(args: dict[str, Any], tool_call_id: str) -> dict[str, Any]:
        return {
            "kind": kind,
            "target": target_of(args),
            "idempotency_key": f"{tool_name}:{tool_call_id}",
            "payload": payload(args) if payload is not None else None,
        }

    def refused(error: LeaseError) -> ToolException:
        return ToolException(refusal_message(error, work_key=holding.work_key))

    async def acall(tool_call_id: str, **args: Any) -> Any:
        assert isinstance(holding, AsyncHolding)
        spec = effect_args(args, tool_call_id)
        try:
            async with holding.effect(
                spec["kind"],
                spec["target"],
                idempotency_key=spec["idempotency_key"],
                payload=spec["payload"],
            ) as fx:
                return await func(**args, **{EFFECT_PARAM: fx})
        except LeaseError as error:
            if stop_on_loss and isinstance(error, LeaseLost):
                raise  # guarded work stops at once: out of the tool, the graph, the run
            raise refused(error) from error

    def call(tool_call_id: str, **args: Any) -> Any:
        assert isinstance(holding, Holding)
        spec = effect_args(args, tool_call_id)
        try:
            with holding.effect(
                spec["kind"],
                spec["target"],
                idempotency_key=spec["idempotency_key"],
                payload=spec["payload"],
            ) as fx:
                return func(**args, **{EFFECT_PARAM: fx})
        except LeaseError as error:
            if stop_on_loss and isinstance(error, LeaseLost):
                raise  # guarded work stops at once: out of the tool, the graph, the run
            raise refused(error) from error

    return StructuredTool(
        name=tool_name,
        description=description or inspect.getdoc(func) or tool_name,
        args_schema=schema,
        coroutine=acall if is_async else None,
        func=None if is_async else call,
        handle_tool_error=True,  # a ToolException becomes the model's error ToolMessage
    )
