"""A LangGraph agent that refunds invoices under a Leaseboard lease.

A refund is a tool call with an external effect (a payment through the demo's payments
service, which checks fencing tokens), so it runs under the lease: proposed to Leaseboard
first, refused when the agent's standing is uncertain or lost, sent with the effect's
fencing token, and its outcome reported. Looking an invoice up has no effect and runs
unguarded. The graph is LangGraph's usual one: a model node, a ToolNode, and a loop
between them while the model asks for tools.

Against `python3 dev.py demo` (see clients/python/README.md), with no LLM and no API key:

    pip install "./clients/python[langgraph]"
    LEASEBOARD_TOKEN=$(.venv/bin/python manage.py create_agent refunds-agent --queue payments)
    LEASEBOARD_TOKEN=$LEASEBOARD_TOKEN python clients/python/examples/langgraph_refunds.py INV-7 500

`ScriptedChatModel` plays the model's turns; any LangChain chat model that supports tool
calling takes its place in `refund_under_lease(model=...)`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, ToolException, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from leaseboard_client import AsyncClient, AsyncHolding, Effect
from leaseboard_client.langchain import effect_tool

INVOICES = {
    "INV-7": {"customer": "acme", "total_cents": 12_000, "currency": "EUR"},
    "INV-8": {"customer": "globex", "total_cents": 4_500, "currency": "EUR"},
}


class ScriptedChatModel(GenericFakeChatModel):
    """Answers with the next scripted message, whatever it is asked: a stand-in LLM for
    running the agent offline. Binding tools changes nothing (the script names them)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


def refund_turns(invoice: str, amount_cents: int) -> list[AIMessage]:
    """The model's side of one refund: look the invoice up, refund it, say so."""
    n = uuid.uuid4().hex[:8]
    return [
        AIMessage(
            "",
            tool_calls=[{"name": "lookup_invoice", "args": {"invoice": invoice}, "id": f"l-{n}"}],
        ),
        AIMessage(
            "",
            tool_calls=[
                {
                    "name": "refund",
                    "args": {"invoice": invoice, "amount_cents": amount_cents},
                    "id": f"r-{n}",
                }
            ],
        ),
        AIMessage(f"Done: {amount_cents} cents refunded on {invoice}."),
    ]


@tool
def lookup_invoice(invoice: str) -> dict[str, Any]:
    """Look an invoice up: its customer, total and currency."""
    if invoice not in INVOICES:
        raise ToolException(f"no invoice {invoice!r}")
    return {"invoice": invoice, **INVOICES[invoice]}


def refund_tool(holding: AsyncHolding, payments: httpx.AsyncClient) -> BaseTool:
    """The refund tool, under `holding`: each call is an effect `payment.refund`."""

    async def refund(invoice: str, amount_cents: int, fx: Effect) -> str:
        """Refund part of an invoice to its customer through the payments service."""
        details = INVOICES.get(invoice)
        if details is None:
            raise ToolException(f"no invoice {invoice!r}")
        response = await payments.post(
            "/sandbox/payments",
            headers=fx.headers(),  # the epoch and the effect's fencing token
            json={
                "amount_cents": amount_cents,
                "currency": details["currency"],
                "payee": f"refund:{details['customer']}",
                "idempotency_key": fx.idempotency_key,
            },
        )
        if response.status_code not in (200, 201):
            code = response.json().get("code", response.status_code)
            raise ToolException(f"the payments service refused the refund ({code})")
        return (
            f"refunded {amount_cents} cents on {invoice}: payment {response.json()['payment_id']}"
        )

    return effect_tool(holding, refund, kind="payment.refund", target="invoice")


def build_agent(model: BaseChatModel, tools: list[BaseTool]) -> CompiledStateGraph[Any]:
    """Model → tools → model … until the model answers without asking for a tool."""
    bound = model.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


async def refund_under_lease(
    holding: AsyncHolding, payments: httpx.AsyncClient, model: BaseChatModel, request: str
) -> list[BaseMessage]:
    """One run of the agent on the work item `holding` stands on."""
    agent = build_agent(model, [lookup_invoice, refund_tool(holding, payments)])
    result = await agent.ainvoke({"messages": [("user", request)]})
    messages: list[BaseMessage] = result["messages"]
    return messages


async def main(invoice: str, amount_cents: int) -> None:
    url = os.environ.get("LEASEBOARD_URL", "http://127.0.0.1:8000")
    work_key = f"refund-{invoice.lower()}-{uuid.uuid4().hex[:6]}"
    model = ScriptedChatModel(messages=iter(refund_turns(invoice, amount_cents)))
    async with (
        AsyncClient(url, os.environ["LEASEBOARD_TOKEN"]) as client,
        httpx.AsyncClient(base_url=url, timeout=5.0) as payments,
    ):
        # The demo's payments service takes payments only from the payments queue.
        await client.admit(work_key, "payments", title=f"Refund {amount_cents} cents on {invoice}")
        async with client.hold(work_key) as holding:
            request = f"Refund {amount_cents} cents on invoice {invoice}."
            for message in await refund_under_lease(holding, payments, model, request):
                message.pretty_print()
    print(f"\nsee {url}/work/{work_key}")


if __name__ == "__main__":
    args = sys.argv[1:] or ["INV-7", "500"]
    asyncio.run(main(args[0], int(args[1])))
