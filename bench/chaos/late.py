"""Check 5 and the epoch-notice figures: the recipient that never hears from a successor.

Only late sends reach the two late recipients: a paused holder (stopped renewing past the
ttl) or a stalled one (past jeopardy, short of the ttl, perhaps taken over meanwhile) sends
each of them the token of the effect it was authorized just before it stopped. Nothing
tells `late` of a newer epoch; `late_notified` gets Leaseboard's epoch-advance notices
(unless the run has `--no-epoch-notices`). The same sends, so the two columns compare.

Check 5 holds if no late send was accepted once a successor could act — granted, and past
the fence it inherited (docs/design.md §5) — and no paused holder's send (past its lease's expiry)
was accepted at all. It also counts what the fence lets through: sends accepted after a
takeover granted a successor whose effects still wait for the fence (harmless by the fence
rule; epoch notices turn them into refusals).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.chaos.recipient import LATE_ROLES, LEDGER, TABLES


def check_late_sends(
    db_url: str, recipient_db_url: str, records: list[dict[str, Any]]
) -> dict[str, Any]:
    """Check 5, with counts per late recipient (`late`: never told of a new epoch;
    `late_notified`: told by epoch-advance notices) for the very same late sends."""
    import psycopg

    rows: dict[str, tuple[str, str | None, int]] = {}
    with psycopg.connect(recipient_db_url) as rconn:
        for role in LATE_ROLES:
            ledger = TABLES[role][0]
            for attempt, status, code, at_ms in rconn.execute(
                "SELECT attempt, status, code, (extract(epoch FROM at) * 1000)::bigint "
                f"FROM {ledger}"
            ).fetchall():
                rows[attempt] = (status, code, at_ms)
    with psycopg.connect(db_url) as conn:
        successors = {
            (key, epoch): (granted, fenced, kind)
            for key, epoch, granted, fenced, kind in conn.execute(
                "SELECT w.key, l.epoch, l.granted_at_ms, l.fenced_until_ms, l.grant_kind "
                "FROM core_lease l JOIN core_workitem w ON w.id = l.work_item_id"
            ).fetchall()
        }
    results = {r["attempt"]: r for r in records if r.get("ev") == "late_result"}
    c: Counter = Counter()
    examples: list[str] = []
    for a in (r for r in records if r.get("ev") == "late_attempt"):
        who = f"{a['recipient']}.{a['mode']}"
        c[f"{who}_sends"] += 1
        res, row = results.get(a["attempt"]), rows.get(a["attempt"])
        if res is None or res["result"] not in ("accepted", "refused") or row is None:
            c[f"{who}_indeterminate"] += 1
            continue
        status, code, at_ms = row
        if status != res["result"]:
            c["answer_differs_from_ledger"] += 1
        nxt = successors.get((a["key"], a["epoch"] + 1))
        if status == "refused":
            c[f"{who}_refused_{code}"] += 1
            continue
        c[f"{who}_accepted"] += 1
        if nxt is None or nxt[0] > at_ms:
            c[f"{who}_accepted_no_successor_yet"] += 1
            continue
        granted, fenced, kind = nxt
        if at_ms < fenced:
            c[f"{who}_accepted_inside_the_fence_after_{kind}"] += 1
        else:
            c["accepted_once_the_successor_could_act"] += 1
            if len(examples) < 5:
                examples.append(
                    f"{a['key']}@{a['epoch']} accepted at {at_ms}, successor {kind} at {granted}"
                )
    c["late_sends_accepted"] = sum(c[f"{role}.pause_accepted"] for role in LATE_ROLES)
    ok = (
        c["accepted_once_the_successor_could_act"] == 0
        and c["late_sends_accepted"] == 0
        and c["answer_differs_from_ledger"] == 0
    )  # a short run may see no pause finish: then there is nothing late to refuse
    return {"ok": ok, **dict(sorted(c.items())), "examples": examples}


def _pct(values: list[int], q: float) -> int | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def notice_figures(db_url: str, recipient_db_url: str) -> dict[str, Any]:
    """Epoch-advance notices: delivered or not, how soon after the grant, and whether before
    the successor's first accepted send at the main recipient."""
    import psycopg

    with psycopg.connect(db_url) as conn:
        notices = conn.execute(
            "SELECT w.key, n.epoch, n.status, n.attempts, "
            "(extract(epoch FROM n.created_at) * 1000)::bigint, "
            "(extract(epoch FROM n.delivered_at) * 1000)::bigint "
            "FROM core_epochnotice n JOIN core_workitem w ON w.id = n.work_item_id"
        ).fetchall()
    if not notices:
        return {"registered": False}
    with psycopg.connect(recipient_db_url) as rconn:
        first_send = {
            (key, epoch): at_ms
            for key, epoch, at_ms in rconn.execute(
                "SELECT work_key, epoch, (extract(epoch FROM min(at)) * 1000)::bigint "
                f"FROM {LEDGER} WHERE status = 'accepted' GROUP BY work_key, epoch"
            ).fetchall()
        }
    c: Counter = Counter()
    latency = []
    for key, epoch, status, attempts, created, delivered in notices:
        c[f"notices_{status}"] += 1
        c["delivery_attempts"] += attempts
        if delivered is None:
            continue
        latency.append(delivered - created)
        sent = first_send.get((key, epoch))
        if sent is None:
            c["successor_never_sent_to_main"] += 1
        elif delivered <= sent:
            c["delivered_before_successors_first_send"] += 1
        else:
            c["delivered_after_successors_first_send"] += 1
    return {
        "registered": True,
        "notices": len(notices),
        **dict(sorted(c.items())),
        "latency_ms_p50": _pct(latency, 0.5),
        "latency_ms_p95": _pct(latency, 0.95),
        "latency_ms_max": max(latency) if latency else None,
    }
