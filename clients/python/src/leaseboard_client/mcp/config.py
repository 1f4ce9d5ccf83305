"""The gateway's TOML configuration, read and checked before anything starts: which
Leaseboard, which credential, which work item, which upstream servers, and which of their
tools are effects (with the kind, target and payload each call is proposed as).

A bad file fails at start-up naming the key (`ConfigError`), never at the first call.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leaseboard_client.timing import ClientTiming, TimingError


class ConfigError(ValueError):
    """An unusable gateway configuration; the message names the key."""


# `{name}` is an argument of the call; `{{` and `}}` are literal braces. Nothing else is
# interpreted (no attribute or index access: a config file is not a program).
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")
_WHOLE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-/]{1,128}$")

TOP_KEYS = {
    "server",
    "token_env",
    "work_key",
    "queue",
    "title",
    "ttl_ms",
    "acquire_wait_s",
    "deny_unmapped",
    "approval_wait_s",
    "approval_poll_s",
    "dashboard_url",
    "timing",
    "upstream",
    "upstreams",
    "tools",
    "serve",
}
UPSTREAM_KEYS = {"command", "env", "cwd", "timeout_s", "prefix"}
TOOL_KEYS = {"effect", "target", "payload"}
SERVE_KEYS = {"transport", "host", "port", "path"}
TIMING_KEYS = {"request_timeout_s", "renew_interval_s", "safety_margin_s", "drift_rate"}


class MissingArgument(ValueError):
    """A template names an argument the call did not give."""


def _render_text(template: str, arguments: Mapping[str, Any]) -> str:
    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(1)
        if name is None:
            raise MissingArgument(f"unbalanced brace in template {template!r}")
        if name not in arguments:
            raise MissingArgument(f"the call has no argument {name!r}")
        value = arguments[name]
        return value if isinstance(value, str) else _json_text(value)

    return _PLACEHOLDER.sub(substitute, template)


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def render(template: Any, arguments: Mapping[str, Any]) -> Any:
    """A payload template over the call's arguments: strings are templates, and a string
    that is exactly `{name}` takes the argument's JSON value (a list stays a list)."""
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole is not None:
            if whole.group(1) not in arguments:
                raise MissingArgument(f"the call has no argument {whole.group(1)!r}")
            return arguments[whole.group(1)]
        return _render_text(template, arguments)
    if isinstance(template, Mapping):
        return {str(k): render(v, arguments) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, arguments) for v in template]
    return template


def _check_template(template: Any, where: str) -> None:
    """Refuse a template that could never render (a stray brace), at start-up."""
    if isinstance(template, str):
        for match in _PLACEHOLDER.finditer(template):
            if match.group(0) in ("{", "}"):
                raise ConfigError(f"{where}: unbalanced brace in {template!r} (write {{{{ or }}}})")
    elif isinstance(template, Mapping):
        for k, v in template.items():
            _check_template(v, f"{where}.{k}")
    elif isinstance(template, list):
        for i, v in enumerate(template):
            _check_template(v, f"{where}[{i}]")


@dataclass(frozen=True)
class ToolEffect:
    """How one upstream tool's calls are proposed: kind, and templates for the target and
    the payload (by default the tool's name and the call's arguments)."""

    tool: str
    kind: str
    target: str | None = None
    payload: Any = None

    def content(self, arguments: Mapping[str, Any]) -> tuple[str, str, Any]:
        """(kind, target, payload) of one call; MissingArgument if a template cannot fill."""
        target = self.tool if self.target is None else _render_text(self.target, arguments)
        payload = dict(arguments) if self.payload is None else render(self.payload, arguments)
        return self.kind, target, payload


@dataclass(frozen=True)
class UpstreamConfig:
    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_s: float = 60.0
    prefix: str = ""  # put before each of its tool names, to keep several upstreams apart


@dataclass(frozen=True)
class ServeConfig:
    transport: str = "stdio"  # or "http" (streamable HTTP)
    host: str = "127.0.0.1"
    port: int = 8931
    path: str = "/mcp"


@dataclass(frozen=True)
class GatewayConfig:
    server: str
    token_env: str
    work_key: str
    upstreams: tuple[UpstreamConfig, ...]
    tools: Mapping[str, ToolEffect]
    queue: str = "default"
    title: str | None = None
    ttl_ms: int | None = None
    acquire_wait_s: float = 10.0
    deny_unmapped: bool = False
    approval_wait_s: float = 25.0
    approval_poll_s: float = 1.0
    dashboard_url: str | None = None  # where approvers decide; defaults to `server`
    timing: ClientTiming = field(default_factory=ClientTiming)
    serve: ServeConfig = field(default_factory=ServeConfig)

    def token(self, environ: Mapping[str, str] | None = None) -> str:
        env = os.environ if environ is None else environ
        value = env.get(self.token_env, "")
        if not value:
            raise ConfigError(f"token_env: the variable {self.token_env} is not set or empty")
        return value

    def approval_page(self, effect_id: str) -> str:
        """The page where an approver decides this effect (the dashboard's effect page)."""
        base = (self.dashboard_url or self.server).rstrip("/")
        return f"{base}/takeovers/effects/{effect_id}"


def _need(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise ConfigError(f"{where}{key}: required")
    return _typed(data[key], kind, f"{where}{key}")


def _typed(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{where}: expected {kind}, got a boolean")
    if kind is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: expected {kind}, got {type(value).__name__}")
    return value


def _positive(value: float, where: str, *, zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{where}: must be {'non-negative' if zero else 'positive'}")
    return value


def _unknown(data: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise ConfigError(f"{where}{extra[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def _upstream(name: str, data: Any, where: str) -> UpstreamConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a table")
    _unknown(data, UPSTREAM_KEYS, f"{where}.")
    command = _need(data, "command", list, f"{where}.")
    if not command or not all(isinstance(part, str) and part for part in command):
        raise ConfigError(f"{where}.command: a non-empty list of strings")
    env = _typed(data.get("env", {}), dict, f"{where}.env")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ConfigError(f"{where}.env: strings only")
    cwd = data.get("cwd")
    if cwd is not None:
        cwd = _typed(cwd, str, f"{where}.cwd")
    timeout = _positive(_typed(data.get("timeout_s", 60.0), float, f"{where}.timeout_s"), where)
    prefix = _typed(data.get("prefix", ""), str, f"{where}.prefix")
    return UpstreamConfig(
        name=name, command=tuple(command), env=env, cwd=cwd, timeout_s=timeout, prefix=prefix
    )


def _tool(name: str, data: Any) -> ToolEffect:
    where = f"tools.{name}"
    if not _TOOL_NAME.match(name):
        raise ConfigError(f"{where}: not a tool name")
    if not isinstance(data, Mapping):
        raise ConfigError(f'{where}: expected a table with effect = "KIND"')
    _unknown(data, TOOL_KEYS, f"{where}.")
    kind = _need(data, "effect", str, f"{where}.")
    if not 1 <= len(kind) <= 100:
        raise ConfigError(f"{where}.effect: 1 to 100 characters")
    target = data.get("target")
    if target is not None:
        target = _typed(target, str, f"{where}.target")
        _check_template(target, f"{where}.target")
    payload = data.get("payload")
    if payload is not None:
        _check_template(payload, f"{where}.payload")
    return ToolEffect(tool=name, kind=kind, target=target, payload=payload)


def _timing(data: Any) -> ClientTiming:
    if not isinstance(data, Mapping):
        raise ConfigError("timing: expected a table")
    _unknown(data, TIMING_KEYS, "timing.")
    values = {k: _typed(v, float, f"timing.{k}") for k, v in data.items()}
    try:
        return ClientTiming(**values).validate()
    except TimingError as exc:
        raise ConfigError(f"timing.{exc.param}: {exc}") from None


def _serve(data: Any) -> ServeConfig:
    if not isinstance(data, Mapping):
        raise ConfigError("serve: expected a table")
    _unknown(data, SERVE_KEYS, "serve.")
    transport = _typed(data.get("transport", "stdio"), str, "serve.transport")
    if transport not in ("stdio", "http"):
        raise ConfigError("serve.transport: stdio or http")
    port = _typed(data.get("port", 8931), int, "serve.port")
    if not 0 <= port <= 65535:
        raise ConfigError("serve.port: 0 to 65535")
    path = _typed(data.get("path", "/mcp"), str, "serve.path")
    if not path.startswith("/"):
        raise ConfigError("serve.path: starts with /")
    return ServeConfig(
        transport=transport,
        host=_typed(data.get("host", "127.0.0.1"), str, "serve.host"),
        port=port,
        path=path,
    )


def config_from_mapping(data: Mapping[str, Any]) -> GatewayConfig:
    """Check a parsed TOML document and build the configuration (ConfigError naming the
    first bad key)."""
    _unknown(data, TOP_KEYS, "")
    server = _need(data, "server", str, "")
    if not server.startswith(("http://", "https://")):
        raise ConfigError("server: an http:// or https:// URL")
    token_env = _need(data, "token_env", str, "")
    work_key = _need(data, "work_key", str, "")
    if not work_key:
        raise ConfigError("work_key: required")
    if ("upstream" in data) == ("upstreams" in data):
        raise ConfigError("upstream: give one [upstream] table or [upstreams.NAME] tables")
    upstreams: tuple[UpstreamConfig, ...]
    if "upstream" in data:
        upstreams = (_upstream("upstream", data["upstream"], "upstream"),)
    else:
        table = _typed(data["upstreams"], dict, "upstreams")
        if not table:
            raise ConfigError("upstreams: at least one")
        upstreams = tuple(_upstream(n, t, f"upstreams.{n}") for n, t in table.items())
    tools_table = _typed(data.get("tools", {}), dict, "tools")
    tools = {name: _tool(name, spec) for name, spec in tools_table.items()}
    ttl_ms = data.get("ttl_ms")
    if ttl_ms is not None:
        ttl_ms = _typed(ttl_ms, int, "ttl_ms")
        if ttl_ms <= 0:
            raise ConfigError("ttl_ms: positive")
    title = data.get("title")
    dashboard_url = data.get("dashboard_url")
    timing = _timing(data.get("timing", {}))
    if ttl_ms is not None:
        try:  # a ttl this client could not keep alive is refused now, not at the acquire
            timing.validate_lease(ttl_ms=ttl_ms, renew_after_ms=ttl_ms // 3)
        except TimingError as exc:
            raise ConfigError(f"ttl_ms: {exc}") from None
    return GatewayConfig(
        server=server,
        token_env=token_env,
        work_key=work_key,
        upstreams=upstreams,
        tools=tools,
        queue=_typed(data.get("queue", "default"), str, "queue"),
        title=_typed(title, str, "title") if title is not None else None,
        ttl_ms=ttl_ms,
        acquire_wait_s=_positive(
            _typed(data.get("acquire_wait_s", 10.0), float, "acquire_wait_s"),
            "acquire_wait_s",
            zero=True,
        ),
        deny_unmapped=_typed(data.get("deny_unmapped", False), bool, "deny_unmapped"),
        approval_wait_s=_positive(
            _typed(data.get("approval_wait_s", 25.0), float, "approval_wait_s"),
            "approval_wait_s",
            zero=True,
        ),
        approval_poll_s=_positive(
            _typed(data.get("approval_poll_s", 1.0), float, "approval_poll_s"), "approval_poll_s"
        ),
        dashboard_url=_typed(dashboard_url, str, "dashboard_url") if dashboard_url else None,
        timing=timing,
        serve=_serve(data.get("serve", {})),
    )


def load_config(path: str | Path) -> GatewayConfig:
    """Read and check a gateway configuration file."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return config_from_mapping(data)
