"""leaseboard.core.services.audit_checkpoints on real files: a checkpoint is signed and
appended to its month's file, read back as it was written, verified under a retired key
too, and any line that is damaged, edited, forged or signed with a key nobody configured
is reported by place instead of read. The audit_checkpoint and verify_audit commands'
tests run these against the chain in PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leaseboard.core.models.audit import AuditKeyring
from leaseboard.core.services.audit_checkpoints import (
    Checkpoint,
    checkpoint_append,
    checkpoint_dir,
    checkpoints_read,
)

OLD, NEW = "old-audit-key-" + "a" * 40, "new-audit-key-" + "b" * 40
JAN_2026 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FEB_2026 = 1_769_904_000_000  # 2026-02-01T00:00:00Z


@pytest.fixture
def where(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR = str(tmp_path / "checkpoints")
    return tmp_path / "checkpoints"


def test_nothing_to_read_before_the_first_checkpoint(where: Path) -> None:
    assert checkpoint_dir() == where
    assert checkpoints_read(keyring=AuditKeyring(NEW)) == ([], [])


def test_appended_checkpoints_read_back_in_order_one_file_a_month(where: Path) -> None:
    keyring = AuditKeyring(NEW)
    first = checkpoint_append(seq=10, head="h" * 64, count=10, at_ms=JAN_2026 + 5, keyring=keyring)
    second = checkpoint_append(seq=20, head="i" * 64, count=20, at_ms=JAN_2026 + 9, keyring=keyring)
    third = checkpoint_append(seq=30, head="j" * 64, count=30, at_ms=FEB_2026, keyring=keyring)
    assert sorted(p.name for p in where.iterdir()) == [
        "checkpoints-2026-01.jsonl",
        "checkpoints-2026-02.jsonl",
    ]
    valid, problems = checkpoints_read(keyring=keyring)
    assert problems == []
    assert [(c.seq, c.head, c.count, c.at_ms) for c in valid] == [
        (c.seq, c.head, c.count, c.at_ms) for c in (first, second, third)
    ]
    assert [c.where for c in valid] == [
        "checkpoints-2026-01.jsonl:1",
        "checkpoints-2026-01.jsonl:2",
        "checkpoints-2026-02.jsonl:1",
    ]
    assert first.body()["at"] == "2026-01-01T00:00:00.005Z"
    assert "seq 10, 10 entries" in valid[0].describe()


def test_a_checkpoint_under_a_retired_key_still_verifies(where: Path) -> None:
    checkpoint_append(seq=1, head="h" * 64, count=1, at_ms=JAN_2026, keyring=AuditKeyring(OLD))
    valid, problems = checkpoints_read(keyring=AuditKeyring(NEW, [OLD]))
    assert problems == [] and [c.seq for c in valid] == [1]
    valid, problems = checkpoints_read(keyring=AuditKeyring(NEW))  # the old key forgotten
    assert valid == [] and "unknown audit key id" in problems[0]


def test_edited_damaged_and_foreign_lines_are_reported_by_place(where: Path) -> None:
    keyring = AuditKeyring(NEW)
    checkpoint_append(seq=5, head="h" * 64, count=5, at_ms=JAN_2026, keyring=keyring)
    path = where / "checkpoints-2026-01.jsonl"
    line = json.loads(path.read_text())
    edited = json.dumps({**line, "count": 4})  # a shorter log claimed, same signature
    path.write_text(path.read_text() + edited + "\n" + "{not json\n" + "\n" + '{"seq": 1}\n')
    valid, problems = checkpoints_read(keyring=keyring)
    assert [c.seq for c in valid] == [5]
    assert problems == [
        "checkpoints-2026-01.jsonl:2: signature does not match (forged or edited checkpoint)",
        "checkpoints-2026-01.jsonl:3: not a checkpoint (damaged or written by something else)",
        "checkpoints-2026-01.jsonl:5: not a checkpoint (damaged or written by something else)",
    ]


def test_a_line_torn_by_a_crash_does_not_swallow_the_next(where: Path) -> None:
    keyring = AuditKeyring(NEW)
    checkpoint_append(seq=1, head="h" * 64, count=1, at_ms=JAN_2026, keyring=keyring)
    path = where / "checkpoints-2026-01.jsonl"
    with path.open("a") as fh:
        fh.write('{"v": 1, "seq": 2, "he')  # torn: no newline
    checkpoint_append(seq=3, head="k" * 64, count=3, at_ms=JAN_2026 + 1, keyring=keyring)
    valid, problems = checkpoints_read(keyring=keyring)
    assert [c.seq for c in valid] == [1, 3]
    assert problems == [
        "checkpoints-2026-01.jsonl:2: not a checkpoint (damaged or written by something else)"
    ]
    assert isinstance(valid[1], Checkpoint) and valid[1].key_id == keyring.current_id
