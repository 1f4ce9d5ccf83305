"""The gateway's configuration, with no process and no server: a bad file fails at start-up
naming the key; templates fill a call's kind, target and payload from its arguments; the
refusal an MCP client sees carries the stable code and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leaseboard_client import LeaseRevoked
from leaseboard_client.mcp import ConfigError, load_config
from leaseboard_client.mcp.config import MissingArgument, ToolEffect, config_from_mapping
from leaseboard_client.mcp.gateway import call_digest, forwarded_meta
from leaseboard_client.mcp.refusals import refusal
from leaseboard_client.telemetry import TelemetryError, exporter_names, tracing_configured

BASE: dict[str, Any] = {
    "server": "http://127.0.0.1:8000",
    "token_env": "LB_TOKEN",
    "work_key": "repo-42",
    "upstream": {"command": ["mcp-server-git", "--repository", "/srv/repo"]},
}


def config(**changes: Any) -> Any:
    return config_from_mapping({**BASE, **changes})


def test_a_minimal_config_has_the_documented_defaults() -> None:
    c = config()
    assert (c.queue, c.ttl_ms, c.deny_unmapped, c.serve.transport) == (
        "default",
        None,
        False,
        "stdio",
    )
    assert c.upstreams[0].command == ("mcp-server-git", "--repository", "/srv/repo")
    assert c.approval_page("e1") == "http://127.0.0.1:8000/takeovers/effects/e1"
    assert config(dashboard_url="https://lb.example/").approval_page("e1") == (
        "https://lb.example/takeovers/effects/e1"
    )


@pytest.mark.parametrize(
    ("changes", "names"),
    [
        ({"server": "ftp://x"}, "server"),
        ({"work_key": ""}, "work_key"),
        ({"colour": "blue"}, "colour"),
        ({"upstream": {"command": []}}, "upstream.command"),
        ({"upstream": {"command": ["x"], "timeout": 3}}, "upstream.timeout"),
        ({"tools": {"git_commit": {"effect": ""}}}, "tools.git_commit.effect"),
        ({"tools": {"git_commit": {"kind": "git.commit"}}}, "tools.git_commit.kind"),
        ({"tools": {"git_commit": {"effect": "git.commit", "target": "{repo"}}}, "target"),
        # too short for a set timing: renewals every 333 ms leave no room for a 2 s request
        ({"ttl_ms": 1000, "timing": {"request_timeout_s": 2.0}}, "ttl_ms"),
        ({"timing": {"request_timeout_s": 4.0}}, "timing.request_timeout_s"),
        ({"serve": {"transport": "websocket"}}, "serve.transport"),
        ({"approval_poll_s": 0}, "approval_poll_s"),
        ({"deny_unmapped": "yes"}, "deny_unmapped"),
    ],
)
def test_a_bad_config_is_refused_naming_the_key(changes: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config(**changes)
    assert names in str(refused.value)


def test_one_upstream_or_several_never_both() -> None:
    several = {"git": {"command": ["a"]}, "tickets": {"command": ["b"], "prefix": "t_"}}
    data = {k: v for k, v in BASE.items() if k != "upstream"}
    c = config_from_mapping({**data, "upstreams": several})
    assert [(u.name, u.prefix) for u in c.upstreams] == [("git", ""), ("tickets", "t_")]
    with pytest.raises(ConfigError, match="upstream"):
        config_from_mapping({**BASE, "upstreams": several})
    with pytest.raises(ConfigError, match="upstream"):
        config_from_mapping(data)


def test_templates_fill_the_target_and_payload_from_the_call() -> None:
    commit = ToolEffect("git_commit", "git.commit", "{repo_path}", {"message": "{message}"})
    assert commit.content({"repo_path": "/r", "message": "hi", "extra": 1}) == (
        "git.commit",
        "/r",
        {"message": "hi"},
    )
    # A whole-string placeholder keeps the argument's JSON value; braces can be escaped.
    add = ToolEffect("git_add", "git.stage", "repo {repo_path} {{staged}}", {"files": "{files}"})
    assert add.content({"repo_path": "/r", "files": ["a", "b"]}) == (
        "git.stage",
        "repo /r {staged}",
        {"files": ["a", "b"]},
    )
    # By default: the tool's name and the call's arguments.
    assert ToolEffect("deploy", "deploy.run").content({"env": "prod"}) == (
        "deploy.run",
        "deploy",
        {"env": "prod"},
    )
    with pytest.raises(MissingArgument, match="repo_path"):
        commit.content({"message": "no repo"})


def test_a_config_file_is_read_and_a_missing_token_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gw.toml"
    path.write_text(
        'server = "http://lb:8000"\ntoken_env = "LB_TOKEN"\nwork_key = "w"\n'
        '[upstream]\ncommand = ["srv"]\n[tools.git_commit]\neffect = "git.commit"\n'
    )
    c = load_config(path)
    assert c.tools["git_commit"].kind == "git.commit"
    monkeypatch.delenv("LB_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="LB_TOKEN"):
        c.token()
    assert c.token({"LB_TOKEN": "lb_x"}) == "lb_x"
    path.write_text("server = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")


def test_a_refusal_is_a_tool_error_with_the_code_and_the_reason() -> None:
    error = LeaseRevoked(
        "revoked by olga: misbehaving: loops",
        problem={"code": "lease_revoked", "revoked_by": "olga", "current_epoch": 3, "x": 1},
    )
    result = refusal(error, "git_commit")
    assert result.is_error
    [content] = result.content
    assert "lease_revoked" in content.text and "revoked by olga" in content.text  # type: ignore[union-attr]
    assert (result.meta or {})["leaseboard/problem"] == {
        "code": "lease_revoked",
        "detail": "revoked by olga: misbehaving: loops",
        "revoked_by": "olga",
        "current_epoch": 3,
    }


def test_a_client_cannot_hand_the_upstream_a_token_of_its_own() -> None:
    inbound = {
        "leaseboard/fencing_token": "forged",
        "traceparent": "00-abc",
        "progressToken": 7,
        "io.modelcontextprotocol/clientInfo": {},
        "acme/ticket": "T-1",
    }
    assert forwarded_meta(inbound) == {"acme/ticket": "T-1"}
    assert call_digest("t", {"a": 1, "b": 2}) == call_digest("t", {"b": 2, "a": 1})


def test_tracing_is_off_unless_the_standard_variables_configure_it() -> None:
    assert not tracing_configured({})
    assert tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_configured({"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_configured({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"})
    assert exporter_names({"OTEL_TRACES_EXPORTER": "console,otlp"}) == ["console", "otlp"]
    with pytest.raises(TelemetryError, match="zipkin"):
        exporter_names({"OTEL_TRACES_EXPORTER": "zipkin"})
