"""OpenTelemetry from tool call to decision: one refused call is one trace, spanning the
agent's turn, the gateway (the MCP SDK's `tools/call` server span and the gateway's
`execute_tool` span), the SDK's HTTP call, the API's Django span and the decision's span,
each with its attributes. Spans are collected by the SDK's in-memory exporter.

The gateway runs in this process (the official client connected to its server in-process,
mcp-server-git still a real subprocess behind it) so that one exporter sees every span;
the API is a live server thread started after Django's instrumentation, so its handler
loads the instrumentation's middleware, as a configured server does at start-up.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from opentelemetry import propagate
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanKind, format_trace_id

from leaseboard_client.mcp import Gateway, build_server, load_config
from tests.client.mcp_harness import gateway_config, git_repo, problem, staged_change
from tests.otel import in_memory_tracing
from tests.waiting import async_wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@contextmanager
def instrumented_live_server(provider: TracerProvider) -> Iterator[str]:
    from django.test.testcases import LiveServerThread, _StaticFilesHandler

    DjangoInstrumentor().instrument(tracer_provider=provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    thread = LiveServerThread("127.0.0.1", _StaticFilesHandler, port=0)
    thread.daemon = True
    try:
        thread.start()
        thread.is_ready.wait()
        if thread.error:
            raise thread.error
        url = f"http://127.0.0.1:{thread.port}"
        httpx.get(f"{url}/api/v1/fencing/keys", timeout=30).raise_for_status()  # warm up
        yield url
    finally:
        thread.terminate()
        HTTPXClientInstrumentor().uninstrument()
        DjangoInstrumentor().uninstrument()


def each_call_served(exporter: Any) -> bool:
    """Every HTTP call the httpx instrumentation saw has its Django server span finished."""
    scopes = [
        s.instrumentation_scope.name if s.instrumentation_scope else ""
        for s in exporter.get_finished_spans()
    ]
    calls = sum("httpx" in scope for scope in scopes)
    return calls > 0 and sum("django" in scope for scope in scopes) >= calls


def by_name(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None, span.name
    [parent] = [s for s in spans if s.context.span_id == span.parent.span_id]
    return parent


def test_one_refused_tool_call_is_one_trace_through_the_gateway_the_api_and_the_decision(
    transactional_db: Any, agent: Any, tmp_path: Path, client: Any
) -> None:
    from leaseboard.core.models import Effect, Queue
    from leaseboard.domain.policy import RuleSpec
    from tests.builders import effect_rules, make_user

    queue, _ = Queue.objects.get_or_create(name="no-commits")
    effect_rules(queue, RuleSpec(name="freeze", kind="git.commit", decision="deny", note="frozen"))
    _, token = agent()
    key = f"traced-{uuid.uuid4().hex[:8]}"
    repo = git_repo(tmp_path / "repo")
    staged_change(repo, "traced.txt")

    with in_memory_tracing() as (provider, exporter), instrumented_live_server(provider) as url:
        path = gateway_config(
            tmp_path / "gw.toml", server=url, work_key=key, repo=repo, queue="no-commits"
        )
        gateway = Gateway(load_config(path), token=token)
        agent_tracer = provider.get_tracer("test-agent")

        async def turn() -> tuple[Any, Any]:
            async with Client(build_server(gateway)) as mcp_client:
                assert gateway.holding is not None, gateway.acquire_error
                # The start's last server spans end after its answers.
                await async_wait_until(
                    lambda: each_call_served(exporter), what="the start's server spans ended"
                )
                exporter.clear()  # the start's admission and acquire are traces of their own
                with agent_tracer.start_as_current_span("agent turn") as root:
                    carrier: dict[str, str] = {}
                    propagate.inject(carrier)  # what an instrumented MCP host sends in _meta
                    result = await mcp_client.call_tool(
                        "git_commit", {"repo_path": str(repo), "message": "traced"}, meta=carrier
                    )
                return root, result

        root, result = anyio.run(turn)
        spans = list(exporter.get_finished_spans())

    assert result.is_error and problem(result)["code"] == "policy_denied"
    trace_id = root.get_span_context().trace_id
    in_trace = [s for s in spans if s.context.trace_id == trace_id]
    names = {s.name for s in in_trace}

    # The gateway: the SDK's MCP server span under the agent's turn, and the gateway's own
    # execute_tool span under it, with the GenAI and MCP conventions' attributes.
    call = by_name(in_trace, "tools/call git_commit")
    assert call.kind is SpanKind.SERVER and parent_of(call, in_trace).name == "agent turn"
    assert call.attributes["mcp.method.name"] == "tools/call"
    tool = by_name(in_trace, "execute_tool git_commit")
    assert parent_of(tool, in_trace) is call
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "git_commit"
    assert tool.attributes["mcp.method.name"] == "tools/call"
    assert tool.attributes["leaseboard.work_key"] == key
    assert tool.attributes["leaseboard.decision"] == "refused"
    assert tool.attributes["leaseboard.code"] == "policy_denied"
    assert tool.attributes["leaseboard.policy_rule"] == "freeze"
    assert isinstance(tool.attributes["leaseboard.epoch"], int)

    # The SDK's HTTP call to the API (httpx instrumentation), the API's request (Django
    # instrumentation, continuing the traceparent it was sent), and the decision inside it.
    [http] = [s for s in in_trace if s.kind is SpanKind.CLIENT and parent_of(s, in_trace) is tool]
    assert http.attributes.get("http.request.method", http.attributes.get("http.method")) == "POST"
    [api] = [s for s in in_trace if s.kind is SpanKind.SERVER and s is not call]
    assert parent_of(api, in_trace) is http
    decision = by_name(in_trace, "leaseboard.effect.propose")
    assert parent_of(decision, in_trace) is api
    assert decision.attributes["leaseboard.work_key"] == key
    assert decision.attributes["leaseboard.epoch"] == tool.attributes["leaseboard.epoch"]
    assert decision.attributes["leaseboard.decision"] == "refused"
    assert decision.attributes["leaseboard.code"] == "policy_denied"
    assert decision.attributes["leaseboard.policy_rule"] == "freeze"

    # Refused: nothing went to the upstream (no MCP client span for the call).
    assert not any(n.startswith("MCP send tools/call") for n in names), names

    # The effect keeps the trace id, and its work item page shows it, copyable.
    [effect] = Effect.objects.filter(work_item__key=key)
    assert effect.trace_id == format_trace_id(trace_id)
    client.force_login(make_user(f"mia-{uuid.uuid4().hex[:6]}", "manager"))
    page = client.get(f"/work/{key}").content.decode()
    assert f'data-copy="{effect.trace_id}"' in page
