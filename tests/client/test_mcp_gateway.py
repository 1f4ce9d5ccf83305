"""The fencing MCP gateway end to end: the official `mcp` client drives `leaseboard-mcp` over
stdio, in front of a real `mcp-server-git` on a temporary repository, against a real running
Leaseboard (pytest-django's live server on PostgreSQL). Each test starts its own gateway
(one process and its upstreams), because a gateway holds one lease for its whole life.
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from leaseboard_client import Client
from leaseboard_recipient import EffectContent, InMemoryEpochGuard, TokenVerifier, decide_from_meta
from tests.client.mcp_harness import (
    GatewaySession,
    gateway_config,
    git_repo,
    head,
    problem,
    staged_change,
    text,
    wait_for,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository for the module: each test compares HEAD before and after."""
    return git_repo(tmp_path_factory.mktemp("mcp") / "repo")


@pytest.fixture
def setup(live_server, agent, tmp_path):  # type: ignore[no-untyped-def]
    """An agent credential and a fresh work item key; the config is the test's to write."""
    executor, token = agent()
    # Warm the server up: the gateway's first requests should meet a steady-state server.
    httpx.get(f"{live_server.url}/api/v1/fencing/keys", timeout=30).raise_for_status()
    return {
        "url": live_server.url,
        "executor": executor,
        "token": token,
        "key": f"mcp-{uuid.uuid4().hex[:8]}",
        "dir": tmp_path,
    }


def config_for(setup: dict[str, Any], repo: Path, **options: Any) -> Path:
    """The gateway's config for this test's server, work item and repository (`options` as
    gateway_config takes them: queue, ttl_ms, renew_interval_s, echo, extra)."""
    return gateway_config(
        setup["dir"] / "gw.toml",
        server=setup["url"],
        work_key=setup["key"],
        repo=repo,
        **options,
    )


def lease_of(key: str) -> Any:
    from leaseboard.core.models import Lease

    return Lease.objects.filter(work_item__key=key).order_by("-epoch").first()


def effects_of(key: str) -> list[Any]:
    from leaseboard.core.models import Effect

    return list(Effect.objects.filter(work_item__key=key).order_by("proposed_at_ms", "id"))


def operator() -> Any:
    from leaseboard.core.authority import Actor
    from tests.builders import make_user

    return Actor.human(make_user(f"olga-{uuid.uuid4().hex[:6]}", "operator"))


def work_item_page(client: Any, key: str) -> str:
    from tests.builders import make_user

    client.force_login(make_user(f"viewer-{uuid.uuid4().hex[:6]}", "manager"))
    response = client.get(f"/work/{key}")
    assert response.status_code == 200
    return response.content.decode()


def test_a_commit_lands_then_after_an_operator_revokes_the_next_is_refused(
    setup: dict[str, Any], repo: Path, client: Any
) -> None:
    from leaseboard.core.services.leases import lease_revoke

    config = config_for(
        setup,
        repo,
        ttl_ms=6000,  # renewed every two seconds: the background renewer is seen working
        renew_interval_s=2.0,
        echo=True,
    )
    with GatewaySession(config, setup["token"]) as gw:
        assert {"git_commit", "git_status", "echo_meta"} <= set(gw.tools())
        lease = lease_of(setup["key"])
        assert lease is not None and lease.state == "active"
        # The SDK's renewer keeps the lease: renewals arrive without any tool call.
        wait_for(lambda: lease_of(setup["key"]).renew_count >= 1, what="a background renewal")

        # A read passes through without a proposal.
        status = gw.call("git_status", {"repo_path": str(repo)})
        assert not status.is_error and "On branch main" in text(status)
        assert effects_of(setup["key"]) == []

        # A mapped commit is proposed, authorized, forwarded, and lands.
        before = head(repo)
        staged_change(repo, "one.txt")
        landed = gw.call("git_commit", {"repo_path": str(repo), "message": "one"})
        assert not landed.is_error, text(landed)
        assert head(repo) != before
        [commit] = effects_of(setup["key"])
        assert (commit.kind, commit.target, commit.payload) == (
            "git.commit",
            str(repo),
            {"message": "one"},
        )
        assert commit.decision == "authorized" and commit.outcome == "applied"
        assert (landed.meta or {})["leaseboard/effect_id"] == str(commit.id)

        # A fencing-aware upstream gets the effect's token in _meta, and can verify it
        # offline against the server's keys; the client's trace context goes along.
        traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        echoed = gw.call("echo_meta", {"note": "hi"}, meta={"traceparent": traceparent})
        seen = json.loads(text(echoed))
        assert seen["leaseboard/work_key"] == setup["key"]
        assert seen["leaseboard/epoch"] == lease.epoch
        assert seen["traceparent"].split("-")[1] == traceparent.split("-")[1]
        verifier = TokenVerifier(
            recipient="test-upstream",
            jwks_url=f"{setup['url']}/api/v1/fencing/keys",
            guard=InMemoryEpochGuard(),
        )
        checked = decide_from_meta(
            verifier, seen, content=EffectContent("echo.call", "echo_meta", {"note": "hi"})
        )
        assert checked.accepted, checked
        assert checked.epoch == lease.epoch
        assert checked.claims is not None
        assert checked.claims.effect_id == seen["leaseboard/effect_id"]

        # An operator revokes the lease with a reason; the next commit is refused with
        # lease_revoked, who and why, and the repository gets no new commit.
        who = operator()
        lease_revoke(
            lease_id=lease.id,
            actor=who,
            reason_category="misbehaving",
            reason_text="commits to main without review",
        )
        before = head(repo)
        staged_change(repo, "two.txt")
        refused = gw.call("git_commit", {"repo_path": str(repo), "message": "two"})
        assert refused.is_error
        assert problem(refused)["code"] == "lease_revoked"
        assert f"revoked by {who.name}" in text(refused)
        assert "commits to main without review" in text(refused)
        assert head(repo) == before

    # Every call is on the work item page: the commit, the echo, the refused commit.
    effects = effects_of(setup["key"])
    assert [(e.kind, e.decision, e.refusal_code) for e in effects] == [
        ("git.commit", "authorized", ""),
        ("echo.call", "authorized", ""),
        ("git.commit", "refused", "lease_revoked"),
    ]
    page = work_item_page(client, setup["key"])
    for effect in effects:
        assert f'id="effect-{effect.id}"' in page


def test_a_gateway_frozen_past_its_ttl_while_a_successor_starts_wakes_to_a_refused_commit(
    setup: dict[str, Any], repo: Path, agent: Any, db_clock: Any
) -> None:
    """SIGSTOP the gateway; its ttl passes on the database clock (the only clock a lease's
    validity is measured on) while it is frozen, and a successor acquires. The frozen
    process's own clock saw none of it, as after a VM suspend or a stop-the-world pause, so
    its local deadline cannot save it: Leaseboard's fence must, and the commit it makes on
    waking is refused as stale, recorded, and never reaches the repository."""
    config = config_for(setup, repo)
    with GatewaySession(config, setup["token"]) as gw:
        staged_change(repo, "before-pause.txt")
        assert not gw.call("git_commit", {"repo_path": str(repo), "message": "ok"}).is_error
        lease = lease_of(setup["key"])
        pid = gw.freeze()
        try:
            db_clock.advance(lease.ttl_ms + 2_000)  # past the ttl and the skew allowance
            _, successor_token = agent()
            with Client(setup["url"], successor_token) as successor:
                holding = successor.hold(setup["key"], renew=False)
                assert holding.epoch == lease.epoch + 1
        finally:
            os.kill(pid, signal.SIGCONT)
        before = head(repo)
        staged_change(repo, "after-pause.txt")
        woke = gw.call("git_commit", {"repo_path": str(repo), "message": "late"})
        assert woke.is_error, text(woke)
        assert problem(woke)["code"] == "stale_epoch"
        assert problem(woke)["current_epoch"] == lease.epoch + 1
        assert head(repo) == before
    late = effects_of(setup["key"])[-1]
    assert (late.decision, late.refusal_code, late.epoch, late.current_epoch) == (
        "refused",
        "stale_epoch",
        lease.epoch,
        lease.epoch + 1,
    )


def approval_rule(queue_name: str) -> None:
    from leaseboard.core.models import Queue
    from leaseboard.domain.policy import RuleSpec
    from tests.builders import effect_rules

    queue, _ = Queue.objects.get_or_create(name=queue_name)
    effect_rules(
        queue, RuleSpec(name="commits-reviewed", kind="git.commit", decision="require_approval")
    )


def approval_config(
    setup: dict[str, Any], repo: Path, queue: str, *, approval_wait_s: float
) -> Path:
    """A queue whose commits need an approver, and the gateway's config on it that waits
    `approval_wait_s` for a decision (polling every 0.1 s)."""
    approval_rule(queue)
    return config_for(
        setup,
        repo,
        queue=queue,
        extra=f"approval_wait_s = {approval_wait_s}\napproval_poll_s = 0.1",
    )


def approve(effect_id: str) -> None:
    from leaseboard.core.authority import Actor
    from leaseboard.core.services.approvals import effect_approve
    from tests.builders import make_user

    approver = make_user(f"abe-{uuid.uuid4().hex[:6]}", "approver")
    effect_approve(effect_id=effect_id, actor=Actor.human(approver), note="reviewed")


def test_a_require_approval_rule_holds_the_commit_until_an_approver_decides(
    setup: dict[str, Any], repo: Path
) -> None:
    """A client without elicitation (handshake era): the call waits approval_wait_s, then is
    refused `approval_required` with "retry after"; nothing is forwarded. The approver
    decides; the same call again joins the same effect and lands. On exit the lease is
    released."""
    config = approval_config(setup, repo, "reviewed", approval_wait_s=0.3)
    with GatewaySession(config, setup["token"], mode="legacy") as gw:
        before = head(repo)
        staged_change(repo, "reviewed.txt")
        arguments = {"repo_path": str(repo), "message": "needs review"}
        waiting = gw.call("git_commit", arguments)
        assert waiting.is_error
        said = problem(waiting)
        assert said["code"] == "approval_required" and said["rule"] == "commits-reviewed"
        assert said["retry_after_ms"] == 100 and "retry" in text(waiting).lower()
        assert f"/takeovers/effects/{said['effect_id']}" in text(waiting)
        assert head(repo) == before  # held: never forwarded before the decision
        [held] = effects_of(setup["key"])
        assert held.decision == "pending_approval" and str(held.id) == said["effect_id"]

        approve(said["effect_id"])
        landed = gw.call("git_commit", arguments)
        assert not landed.is_error, text(landed)
        assert head(repo) != before
        [effect] = effects_of(setup["key"])  # the retry joined the one effect
        assert (effect.decision, effect.outcome) == ("authorized", "applied")
    wait_for(lambda: lease_of(setup["key"]).state == "released", what="the release on exit")


def test_a_client_that_can_elicit_is_sent_to_the_approval_page_and_its_call_lands_once_approved(
    setup: dict[str, Any], repo: Path
) -> None:
    """A 2026-07-28 client with elicitation: the gateway answers InputRequiredResult with a
    URL elicitation naming the approval page; while the user is there an approver decides,
    the client's retry finds the effect authorized, and the one call lands."""
    import anyio
    import mcp_types as types

    config = approval_config(setup, repo, "reviewed-elicit", approval_wait_s=5)
    asked: list[types.ElicitRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        effect_id = params.url.rstrip("/").rsplit("/", 1)[-1]  # type: ignore[union-attr]

        def decide() -> None:
            from django.db import connection

            try:
                approve(effect_id)
            finally:
                connection.close()

        await anyio.to_thread.run_sync(decide)
        return types.ElicitResult(action="accept")

    with GatewaySession(config, setup["token"], elicitation=elicitation) as gw:
        assert gw.client.protocol_version == "2026-07-28"
        before = head(repo)
        staged_change(repo, "elicited.txt")
        landed = gw.call("git_commit", {"repo_path": str(repo), "message": "asked first"})
        assert not landed.is_error, text(landed)
        assert head(repo) != before
    [params] = asked
    assert isinstance(params, types.ElicitRequestURLParams)
    [effect] = effects_of(setup["key"])
    assert params.url.endswith(f"/takeovers/effects/{effect.id}")
    assert (effect.decision, effect.outcome, effect.decided_by_id is not None) == (
        "authorized",
        "applied",
        True,
    )


def test_over_streamable_http_the_gateway_serves_and_releases_its_lease_on_sigterm(
    setup: dict[str, Any], repo: Path
) -> None:
    """`--transport http`: an MCP client over streamable HTTP gets the same fenced calls;
    SIGTERM unwinds the gateway, which releases the lease instead of letting it expire."""
    import socket
    import subprocess

    import anyio
    from mcp import Client as McpClient

    from tests.client.mcp_harness import GATEWAY, TOKEN_ENV

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = config_for(setup, repo)
    process = subprocess.Popen(
        [GATEWAY, "--config", str(config), "--transport", "http", "--port", str(port)],
        env={**os.environ, TOKEN_ENV: setup["token"]},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: lease_of(setup["key"]), timeout_s=30, what="the gateway's lease")

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, timeout_s=30, what="the gateway's HTTP port")

        async def commit() -> Any:
            async with McpClient(f"http://127.0.0.1:{port}/mcp") as client:
                staged_change(repo, "over-http.txt")
                return await client.call_tool(
                    "git_commit", {"repo_path": str(repo), "message": "over http"}
                )

        before = head(repo)
        landed = anyio.run(commit)
        assert not landed.is_error, text(landed)
        assert head(repo) != before
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert lease_of(setup["key"]).state == "released"
    [effect] = effects_of(setup["key"])
    assert (effect.decision, effect.outcome) == ("authorized", "applied")
