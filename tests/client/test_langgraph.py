"""The LangGraph example (clients/python/examples/langgraph_refunds.py) and the tool adapter
(leaseboard_client.langchain), run offline with a scripted chat model: no model calls, no
network beyond this machine's live server.

Against the live server (the payments sandbox mounted, as in the demo): a refund the agent
makes under its lease reaches the payments service with its effect token; after an
operator revokes the lease on the dashboard, the agent's next refund is refused by
Leaseboard before it reaches anyone, the run stops, and the dashboard shows it refused.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from langchain_core.messages import ToolMessage

from leaseboard_client import (
    AsyncClient,
    AsyncRenewer,
    Effect,
    LeaseRevoked,
    Renewer,
)
from leaseboard_client.langchain import effect_tool
from tests.builders import admit, make_user
from tests.client.fakes import TIMING, FakeServer, offline_async_client, offline_client
from tests.client.harness import in_thread

EXAMPLE = Path(__file__).resolve().parents[2] / "clients/python/examples/langgraph_refunds.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_refunds", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the tools' annotations through it
    spec.loader.exec_module(module)
    return module


example = load_example()


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# -- against the live server -----------------------------------------------------------------------


@pytest.fixture
def payments_sandbox(demo_mounted):  # type: ignore[no-untyped-def]
    """The demo's payments service, with a verifier for this test database's keys."""
    from leaseboard.sandbox import fence

    fence._verifier = None
    yield
    fence._verifier = None


@pytest.mark.postgres
def test_a_refund_after_the_lease_is_revoked_is_refused_stops_the_agent_and_shows_on_the_dashboard(
    live_server,  # type: ignore[no-untyped-def]
    payments_sandbox,  # type: ignore[no-untyped-def]
    agent,  # type: ignore[no-untyped-def]
    client,  # type: ignore[no-untyped-def]
) -> None:
    from leaseboard.core.models import Queue

    # The demo's payments service takes payments only from the payments queue.
    Queue.objects.get_or_create(name="payments")
    _, token = agent("refund-agent", queues=["payments"])
    key = "refund-ticket-42"
    admit(key, queue="payments")
    client.force_login(make_user("olga-refunds", "operator"))
    model = example.ScriptedChatModel(
        messages=iter(example.refund_turns("INV-7", 500) + example.refund_turns("INV-8", 300))
    )

    async def scenario() -> tuple[str, list[Any]]:
        # Renewals are driven by hand (none here): the revocation reaches the agent through
        # its next tool call, the case where nothing local could have known.
        renewer = AsyncRenewer(start_task=False)
        async with (
            AsyncClient(live_server.url, token, timing=TIMING, renewer=renewer) as leaseboard,
            httpx.AsyncClient(base_url=live_server.url, timeout=10) as payments,
        ):
            holding = await leaseboard.hold(key)
            first = await example.refund_under_lease(
                holding, payments, model, "Refund 500 cents on INV-7."
            )

            revoked = await in_thread(
                client.post,
                f"/leases/{holding.lease_id}/revoke",
                {
                    "reason_category": "customer",
                    "reason_text": "the customer disputes every refund",
                },
            )
            assert revoked.status_code == 302, revoked.content

            with pytest.raises(LeaseRevoked):
                await example.refund_under_lease(
                    holding, payments, model, "Refund 300 cents on INV-8."
                )
            assert isinstance(holding.lost, LeaseRevoked)
            return holding.lease_id, first

    lease_id, first = asyncio.run(scenario())

    # The first refund went through: authorized, paid with its token, reported applied.
    lookup, refund = tool_messages(first)
    assert lookup.status == "success" and "acme" in lookup.content
    assert refund.status == "success" and "refunded 500 cents on INV-7" in refund.content
    assert first[-1].content == "Done: 500 cents refunded on INV-7."

    from leaseboard.core.models import Effect as EffectRow
    from leaseboard.sandbox.models import Payment

    rows = {e.target: e for e in EffectRow.objects.filter(work_item__key=key)}
    assert set(rows) == {"INV-7", "INV-8"}
    paid, refused = rows["INV-7"], rows["INV-8"]
    assert (paid.kind, paid.decision, paid.outcome) == ("payment.refund", "authorized", "applied")
    assert paid.payload == {"invoice": "INV-7", "amount_cents": 500}
    assert paid.idempotency_key.startswith("refund:r-")
    # The one after the revocation: recorded, refused, never attempted.
    assert (refused.decision, refused.refusal_code) == ("refused", "lease_revoked")
    assert str(refused.lease_id) == lease_id and refused.outcome == ""
    payments = list(Payment.objects.filter(work_key=key))
    assert [(p.status, p.payee, p.amount_cents) for p in payments] == [
        ("accepted", "refund:acme", 500)
    ]
    assert payments[0].effect_id == str(paid.id)

    page = client.get(f"/work/{key}")
    assert page.status_code == 200
    html = page.content.decode()
    row = html[html.index(f'id="effect-{refused.id}"') :]
    row = row[: row.index("</tr>")]
    assert "decision-refused" in row and "lease_revoked" in row and "INV-8" in row


# -- the adapter, offline -----------------------------------------------------------------------


def fake_client(server: FakeServer) -> AsyncClient:
    return offline_async_client(server, AsyncRenewer(clock=server.clock, start_task=False))


async def refund(invoice: str, amount_cents: int, fx: Effect) -> str:
    """Refund part of an invoice."""
    return f"refunded {amount_cents} on {invoice} with {fx.headers()['X-Fencing-Token']}"


def test_the_model_sees_the_tools_arguments_and_not_the_effect_or_the_call_id(
    server: FakeServer,
) -> None:
    async def scenario() -> None:
        async with fake_client(server) as leaseboard, leaseboard.hold("job-1") as holding:
            tool = effect_tool(holding, refund, kind="payment.refund", target="invoice")
            schema = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
            assert set(schema["properties"]) == {"invoice", "amount_cents"}
            assert tool.description == "Refund part of an invoice."
            call = {"name": "refund", "args": {"invoice": "INV-7", "amount_cents": 5}}
            answer = await tool.ainvoke({**call, "id": "call-1", "type": "tool_call"})
            assert (
                answer.status == "success" and answer.content == "refunded 5 on INV-7 with tok-e1"
            )

    asyncio.run(scenario())
    [proposal] = [b for _, p, b in server.requests if p == "/api/v1/effects"]
    assert proposal["idempotency_key"] == "refund:call-1"
    assert proposal["target"] == "INV-7" and proposal["kind"] == "payment.refund"
    assert proposal["payload"] == {"invoice": "INV-7", "amount_cents": 5}
    assert [b for _, p, b in server.requests if p.endswith("/outcome")] == [{"outcome": "applied"}]


def test_a_tool_call_in_local_jeopardy_is_refused_to_the_model_without_a_request(
    server: FakeServer,
) -> None:
    ran: list[str] = []

    async def pay(invoice: str, fx: Effect) -> str:
        """Pay an invoice."""
        ran.append(invoice)
        return "paid"

    async def scenario() -> ToolMessage:
        async with fake_client(server) as leaseboard, leaseboard.hold("job-1") as holding:
            tool = effect_tool(holding, pay, kind="payment.charge", target="invoice")
            server.clock.now = holding.deadline
            sent = len(server.requests)
            answer = await tool.ainvoke(
                {"name": "pay", "args": {"invoice": "INV-7"}, "id": "c", "type": "tool_call"}
            )
            assert len(server.requests) == sent
            return answer  # type: ignore[no-any-return]

    answer = asyncio.run(scenario())
    assert answer.status == "error" and "local_jeopardy" in answer.content
    assert "uncertain" in answer.content and ran == []


def test_with_stop_on_loss_off_a_lost_lease_is_reported_to_the_model_and_the_run_goes_on(
    server: FakeServer,
) -> None:
    def pay(invoice: str, fx: Effect) -> str:
        """Pay an invoice."""
        raise AssertionError("ran without standing")

    sync = offline_client(server, Renewer(clock=server.clock, start_thread=False))
    holding = sync.hold("job-1")
    tool = effect_tool(holding, pay, kind="payment.charge", target="invoice", stop_on_loss=False)
    model = example.ScriptedChatModel(
        messages=iter(
            [
                example.AIMessage(
                    "",
                    tool_calls=[{"name": "pay", "args": {"invoice": "INV-7"}, "id": "c1"}],
                ),
                example.AIMessage("I no longer hold this work; stopping."),
            ]
        )
    )
    server.fail_next.append(httpx.Response(409, json={"code": "lease_revoked"}))
    result = asyncio.run(
        example.build_agent(model, [tool]).ainvoke({"messages": [("user", "pay INV-7")]})
    )
    [answer] = tool_messages(result["messages"])
    assert answer.status == "error" and "lease_revoked" in answer.content
    assert "no longer holds 'job-1'" in answer.content
    assert result["messages"][-1].content == "I no longer hold this work; stopping."
    assert isinstance(holding.lost, LeaseRevoked)


def test_a_tool_must_take_the_effect_and_match_the_holdings_kind(server: FakeServer) -> None:
    holding = offline_client(server, Renewer(clock=server.clock, start_thread=False)).hold("job-1")

    def no_effect(invoice: str) -> str:
        """No fx."""
        return invoice

    with pytest.raises(TypeError, match="'fx'"):
        effect_tool(holding, no_effect, kind="k", target="invoice")
    with pytest.raises(TypeError, match="coroutine"):
        effect_tool(holding, refund, kind="k", target="invoice")  # async under a sync holding
