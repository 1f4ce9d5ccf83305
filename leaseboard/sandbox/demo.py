"""Demo fixtures shared by `demo_setup` (writes) and `simulate_agents` (reads).

Secrets live in files under DATA_DIR/demo (mode 0600), never in command output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.conf import settings

AGENT_PREFIX = "demo-agent-"
SANDBOX_RECIPIENT = "payments-sandbox"  # a recipient, not an agent
DEFAULT_AGENTS = 6
MAX_AGENTS = 50

# Short ttls so jeopardy, expiry and stale effects all happen within the first minute.
# Rules: (name, kind glob, condition, decision), first match wins; else `default`.
QUEUES: dict[str, dict] = {
    "payments": {
        "timing": {"ttl_ms": 9000},
        "rules": [
            ("refunds-need-approval", "payment.refund", "", "require_approval"),
            (
                "large-charges-need-approval",
                "payment.charge",
                "has(payload.amount_cents) && payload.amount_cents > 50000",
                "require_approval",
            ),
        ],
        "default": "allow",
    },
    "ledger-sync": {"timing": {"ttl_ms": 6000}, "rules": [], "default": "allow"},
}
# How pages show the payments' amounts: the fleet pays in minor units of euros (sandbox.fleet).
EFFECT_KINDS: dict[str, dict] = {
    "payment.*": {
        "amount_field": "amount_cents",
        "currency": "EUR",
        "minor_units": 2,
        "currency_field": "currency",
    },
}


def agent_queues(index: int) -> list[str]:
    """The queues the demo's agent number `index` (0-based) may use: the ones its job in
    the fleet's plan (sandbox.fleet.Fleet.plan) admits to, and no other: the first five
    work in payments, the steady ones after them alternate ledger-sync and payments."""
    if index < 5:
        return ["payments"]
    return ["ledger-sync"] if (index - 5) % 2 == 0 else ["payments"]


def demo_dir() -> Path:
    path = Path(settings.DATA_DIR) / "demo"
    path.mkdir(parents=True, exist_ok=True)
    return path


def agents_file() -> Path:
    return demo_dir() / "agents.json"


def users_file() -> Path:
    return demo_dir() / "users.json"


def read_secret_json(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_secret(path: Path, text: str) -> None:
    # Created 0600 from the start: the token never sits in a world-readable file.
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def agent_tokens() -> dict[str, str]:
    """{agent name: bearer token} for the demo fleet, in name order."""
    tokens = read_secret_json(agents_file())
    return dict(sorted(tokens.items(), key=lambda kv: (len(kv[0]), kv[0])))
