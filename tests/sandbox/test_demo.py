"""leaseboard.sandbox.demo, the fixtures `demo_setup` writes and `simulate_agents` reads:
secrets go to files created 0600 under DATA_DIR/demo and are read back tolerantly (a
missing or damaged file is no tokens, not a crash), tokens come in the agents' number
order, each agent's queues are ones the demo defines, and the demo's rules are valid rule
sets. tests/e2e/test_demo.py runs `dev.py demo` end to end."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from leaseboard.domain.policy import RuleSpec, rule_set_compiled
from leaseboard.sandbox import demo


@pytest.fixture
def data_dir(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.DATA_DIR = str(tmp_path)
    return tmp_path / "demo"


def test_secrets_are_written_0600_and_replaced_whole(data_dir: Path) -> None:
    path = demo.agents_file()
    assert path.parent == data_dir and data_dir.is_dir()
    demo.write_secret(path, '{"demo-agent-1": "t1"}')
    demo.write_secret(path, '{"demo-agent-1": "t2"}')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert demo.read_secret_json(path) == {"demo-agent-1": "t2"}
    assert not list(data_dir.glob("*.tmp"))


def test_a_missing_damaged_or_foreign_file_reads_as_no_secrets(data_dir: Path) -> None:
    path = demo.users_file()
    assert demo.read_secret_json(path) == {}
    for text in ("{not json", "[1, 2]", '"a string"'):
        demo.write_secret(path, text)
        assert demo.read_secret_json(path) == {}
    demo.write_secret(path, '{"olga": 7}')
    assert demo.read_secret_json(path) == {"olga": "7"}


def test_agent_tokens_come_in_the_agents_number_order(data_dir: Path) -> None:
    names = ["demo-agent-10", "demo-agent-2", "demo-agent-1"]
    demo.write_secret(demo.agents_file(), "{" + ", ".join(f'"{n}": "{n}-t"' for n in names) + "}")
    assert list(demo.agent_tokens()) == ["demo-agent-1", "demo-agent-2", "demo-agent-10"]


def test_every_agent_works_only_in_a_queue_the_demo_defines() -> None:
    plans = [demo.agent_queues(i) for i in range(demo.MAX_AGENTS)]
    assert all(len(q) == 1 and q[0] in demo.QUEUES for q in plans)
    assert plans[:5] == [["payments"]] * 5
    assert plans[5:9] == [["ledger-sync"], ["payments"], ["ledger-sync"], ["payments"]]


@pytest.mark.parametrize("queue", sorted(demo.QUEUES))
def test_the_demos_rules_are_valid_rule_sets(queue: str) -> None:
    config = demo.QUEUES[queue]
    specs = [
        RuleSpec(name=name, kind=kind, when=when, decision=decision)
        for name, kind, when, decision in config["rules"]
    ]
    rule_set_compiled(specs, config["default"])
    assert config["timing"]["ttl_ms"] > 0
