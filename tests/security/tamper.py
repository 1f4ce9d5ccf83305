"""What a database owner without the audit key can do to the audit table, through a plain
DB-API cursor (PostgreSQL through Django's connection, or sqlite3): edit, re-hash the
chain the way the code computes it, delete the tail, empty the table. Test helpers only."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

ATTACKER_KEY = "not-the-audit-key-but-long-enough-0123456789"


def audit_rows(cur: Any) -> list[dict[str, Any]]:
    cur.execute("SELECT * FROM core_auditentry ORDER BY seq")
    names = [col[0] for col in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def entry_body(row: dict[str, Any]) -> dict[str, Any]:
    """The body the model's canonical form is computed over (AuditEntry.body())."""

    def as_json(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    body = {
        "seq": row["seq"],
        "at_ms": row["at_ms"],
        "actor_user": row["actor_user_id"],
        "actor_name": row["actor_name"],
        "actor_role": row["actor_role"],
        "action": row["action"],
        "object_type": row["object_type"],
        "object_id": row["object_id"],
        "work_item": row["work_item_id"],
        "reason": row["reason"],
        "before": as_json(row["before"]),
        "after": as_json(row["after"]),
        "request_id": row["request_id"],
        "prev_hash": row["prev_hash"],
    }
    if row.get("key_id"):
        body["key_id"] = row["key_id"]
    return body


def canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=str).encode()


def sha256_mac(body: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


def attacker_hmac(body: dict[str, Any]) -> str:
    return hmac.new(ATTACKER_KEY.encode(), canonical(body), hashlib.sha256).hexdigest()


def rehash_chain(
    cur: Any, *, ph: str = "%s", mac: Callable[[dict[str, Any]], str] = sha256_mac
) -> None:
    """Recompute every entry's hash and link and point the head at the last one."""
    prev = "0" * 64
    last_seq = 0
    for row in audit_rows(cur):
        row["prev_hash"] = prev
        new = mac(entry_body(row))
        cur.execute(
            f"UPDATE core_auditentry SET prev_hash = {ph}, hash = {ph} WHERE seq = {ph}",
            [prev, new, row["seq"]],
        )
        prev, last_seq = new, row["seq"]
    cur.execute(
        f"UPDATE core_audithead SET seq = {ph}, last_hash = {ph} WHERE id = 1", [last_seq, prev]
    )


def edit_reason(cur: Any, seq: int, *, ph: str = "%s") -> None:
    cur.execute(f"UPDATE core_auditentry SET reason = {ph} WHERE seq = {ph}", ["edited", seq])


def delete_tail(cur: Any, keep: int, *, ph: str = "%s") -> None:
    """Delete entries after `keep` and point the head at the new last one: a shorter log
    that is internally consistent."""
    cur.execute(f"DELETE FROM core_auditentry WHERE seq > {ph}", [keep])
    cur.execute(f"SELECT hash FROM core_auditentry WHERE seq = {ph}", [keep])
    last = cur.fetchone()[0]
    cur.execute(
        f"UPDATE core_audithead SET seq = {ph}, last_hash = {ph} WHERE id = 1", [keep, last]
    )
