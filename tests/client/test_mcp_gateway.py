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

import pytest

from leaseboard_client import Client
from leaseboard_recipient import TokenVerifier
from tests.client.mcp_harness import (
    GatewaySession,
    commit_count,
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
    return {
        "url": live_server.url,
        "executor": executor,
        "token": token,
        "key": f"mcp-{uuid.uuid4().hex[:8]}",
        "dir": tmp_path,
    }


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

    config = gateway_config(
        setup["dir"] / "gw.toml",
        server=setup["url"],
        work_key=setup["key"],
        repo=repo,
        ttl_ms=3000,  # renewed about every second: the background renewer is seen working
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
            recipient="test-upstream", jwks_url=f"{setup['url']}/api/v1/fencing/keys"
        )
        claims = verifier.verify(seen["leaseboard/fencing_token"], work_key=setup["key"])
        assert claims.epoch == lease.epoch and claims.effect_id == seen["leaseboard/effect_id"]

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
