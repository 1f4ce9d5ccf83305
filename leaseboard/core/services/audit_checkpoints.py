"""Signed audit checkpoints, kept outside the database in append-only JSON-lines files.

A checkpoint says "at time T the chain ended at seq S with head H and held C entries",
signed with an HMAC under a sub-key of the audit key. Whoever runs the database can
neither forge one nor make the log shorter than the newest one without `verify_audit`
saying so. Files are `checkpoints-YYYY-MM.jsonl` in LEASEBOARD_AUDIT_CHECKPOINT_DIR; lines
are only ever appended.
"""

from __future__ import annotations

import hmac
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from leaseboard.core.models.audit import AuditKeyring, checkpoint_mac

FILE_GLOB = "checkpoints-*.jsonl"
VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    head: str
    count: int
    at_ms: int
    key_id: str
    where: str = ""  # "file:line", for messages

    def body(self) -> dict[str, Any]:
        at = datetime.fromtimestamp(self.at_ms / 1000, UTC).isoformat(timespec="milliseconds")
        return {
            "v": VERSION,
            "seq": self.seq,
            "head": self.head,
            "count": self.count,
            "at_ms": self.at_ms,
            "at": at.replace("+00:00", "Z"),
            "key_id": self.key_id,
        }

    def describe(self) -> str:
        return (
            f"checkpoint {self.where} (seq {self.seq}, {self.count} entries, {self.body()['at']})"
        )


def checkpoint_dir() -> Path:
    return Path(settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR)


def _parse(raw: str, where: str, keyring: AuditKeyring) -> Checkpoint | str:
    """A valid checkpoint, or the reason the line is not one."""
    try:
        data = json.loads(raw)
        mac = data.pop("mac")
        cp = Checkpoint(
            seq=int(data["seq"]),
            head=str(data["head"]),
            count=int(data["count"]),
            at_ms=int(data["at_ms"]),
            key_id=str(data["key_id"]),
            where=where,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{where}: not a checkpoint (damaged or written by something else)"
    key = keyring.keys.get(cp.key_id)
    if key is None:
        return (
            f"{where}: signed with unknown audit key id {cp.key_id!r} "
            "(forged, or its key is not configured)"
        )
    if data != cp.body() or not hmac.compare_digest(
        checkpoint_mac(key, data).encode(), str(mac).encode()
    ):
        return f"{where}: signature does not match (forged or edited checkpoint)"
    return cp


def checkpoints_read(
    *, keyring: AuditKeyring, directory: Path | None = None
) -> tuple[list[Checkpoint], list[str]]:
    """Every valid checkpoint (file order) and one problem line per invalid one."""
    directory = directory or checkpoint_dir()
    valid: list[Checkpoint] = []
    problems: list[str] = []
    if not directory.is_dir():
        return valid, problems
    for path in sorted(directory.glob(FILE_GLOB)):
        with path.open(encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                parsed = _parse(line, f"{path.name}:{number}", keyring)
                if isinstance(parsed, Checkpoint):
                    valid.append(parsed)
                else:
                    problems.append(parsed)
    return valid, problems


def checkpoint_append(
    *, seq: int, head: str, count: int, at_ms: int, keyring: AuditKeyring
) -> Checkpoint:
    """Sign and append one checkpoint line (fsynced) to this month's file."""
    directory = checkpoint_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    cp = Checkpoint(seq=seq, head=head, count=count, at_ms=at_ms, key_id=keyring.current_id)
    body = cp.body()
    line = json.dumps({**body, "mac": checkpoint_mac(keyring.current_key, body)}, sort_keys=True)
    path = directory / f"checkpoints-{body['at'][:7]}.jsonl"
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        # A line torn by a crash must not swallow this one: start on a fresh line.
        size = os.fstat(fd).st_size
        prefix = b""
        if size:
            with path.open("rb") as fh:
                fh.seek(size - 1)
                prefix = b"" if fh.read(1) == b"\n" else b"\n"
        os.write(fd, prefix + line.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return cp
