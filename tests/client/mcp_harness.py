"""The MCP gateway's test harness: a temporary git repository, a gateway configuration, and
`GatewaySession`, the official `mcp` client driving `leaseboard-mcp` over stdio from a
background event loop (anyio's blocking portal), so that a test reads top to bottom and
calls Django services directly between tool calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from opentelemetry import context, propagate

from tests.waiting import wait_until

BIN = Path(sys.executable).parent
GATEWAY = str(BIN / "leaseboard-mcp")
GIT_SERVER = str(BIN / "mcp-server-git")
ECHO_SERVER = str(Path(__file__).with_name("mcp_echo.py"))
TOKEN_ENV = "LEASEBOARD_TEST_AGENT_TOKEN"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "agent@example.test")
    git(path, "config", "user.name", "Agent")
    (path / "README").write_text("start\n")
    git(path, "add", "README")
    git(path, "commit", "-qm", "start")
    return path


def staged_change(repo: Path, name: str) -> None:
    """What the agent did in its working tree before asking to commit."""
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def commit_count(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


def gateway_config(
    path: Path,
    *,
    server: str,
    work_key: str,
    repo: Path,
    queue: str = "default",
    ttl_ms: int = 30_000,
    renew_interval_s: float = 5.0,
    echo: bool = False,
    extra: str = "",
) -> Path:
    """A gateway config in front of mcp-server-git on `repo` (and the echo server): commits
    are effects `git.commit` on the repository, with the message as their payload."""
    upstreams = f"""
[upstreams.git]
command = [{json.dumps(GIT_SERVER)}, "--repository", {json.dumps(str(repo))}]
timeout_s = 20
"""
    if echo:
        upstreams += f"""
[upstreams.echo]
command = [{json.dumps(sys.executable)}, {json.dumps(ECHO_SERVER)}]
"""
    text = f"""
server = {json.dumps(server)}
token_env = "{TOKEN_ENV}"
work_key = {json.dumps(work_key)}
queue = {json.dumps(queue)}
ttl_ms = {ttl_ms}
{extra}

[timing]
request_timeout_s = {min(2.0, renew_interval_s / 2)}
renew_interval_s = {renew_interval_s}
safety_margin_s = 0.5
{upstreams}
[tools.git_commit]
effect = "git.commit"
target = "{{repo_path}}"
payload = {{ message = "{{message}}" }}

[tools.echo_meta]
effect = "echo.call"
"""
    if not echo:
        text = text.replace('[tools.echo_meta]\neffect = "echo.call"\n', "")
    path.write_text(text)
    return path


class GatewaySession:
    """One `leaseboard-mcp` process and the `mcp` client talking to it over stdio."""

    def __init__(
        self,
        config: Path,
        token: str,
        *,
        mode: str = "auto",
        elicitation: Callable[..., Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        params = StdioServerParameters(
            command=GATEWAY,
            args=["--config", str(config)],
            env={TOKEN_ENV: token, **(env or {})},
        )
        self._portal_cm = start_blocking_portal()
        self.portal: BlockingPortal = self._portal_cm.__enter__()
        client = Client(params, mode=mode, elicitation_callback=elicitation)
        self._client_cm = self.portal.wrap_async_context_manager(client)
        try:
            self.client: Client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    def call(
        self, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        async def run() -> types.CallToolResult:
            # A traceparent is the host's current trace: the client's own instrumentation
            # (when this process has a tracer provider) then continues it, as a host's would.
            token = context.attach(propagate.extract(meta)) if meta else None
            try:
                with anyio.fail_after(60):
                    return await self.client.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
            finally:
                if token is not None:
                    context.detach(token)

        return self.portal.call(run)

    def tools(self) -> list[str]:
        return [t.name for t in self.portal.call(self.client.list_tools).tools]

    def pid(self) -> int:
        """The gateway process (found by its unique config path among our children)."""
        needle = str(self.config).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if needle in cmdline and b"leaseboard-mcp" in cmdline:
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid():
                    return int(entry.name)
        raise AssertionError("the gateway process is not running")

    def freeze(self) -> int:
        pid = self.pid()
        os.kill(pid, signal.SIGSTOP)
        return pid

    def close(self) -> None:
        try:
            self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)

    def __enter__(self) -> GatewaySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def problem(result: types.CallToolResult) -> dict[str, Any]:
    return dict((result.meta or {}).get("leaseboard/problem") or {})


def wait_for(condition: Callable[[], Any], *, timeout_s: float = 10.0, what: str = "") -> Any:
    return wait_until(condition, what=what or str(condition), timeout_s=timeout_s, interval_s=0.05)
