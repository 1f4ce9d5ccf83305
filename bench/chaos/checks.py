"""The four properties `make chaos` proves after a run, each with its counts and `ok` (the
fifth, late sends at the recipient that never hears from a successor, is in late.py).

(1) no effect accepted below the recipient's high-water mark; (2) no two holders with live
standing on one work item at once; (3) every attempted effect is in the recipient's
ledger; (4) every expired lease alerted exactly once. Reads both databases directly.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any


def check(
    db_url: str, recipient_db_url: str, records: list[dict[str, Any]], keys: list[str]
) -> dict[str, dict[str, Any]]:
    """The four properties, each with its counts and `ok`. Reads the databases directly."""
    import psycopg

    with psycopg.connect(recipient_db_url) as rconn:
        ledger = rconn.execute(
            "SELECT id, attempt, work_key, epoch, high_water, status, code, kind "
            "FROM chaos_ledger ORDER BY id"
        ).fetchall()
    with psycopg.connect(db_url) as conn:
        leases = conn.execute(
            "SELECT l.id::text, w.key, l.epoch, l.state, l.granted_at_ms, l.ended_at_ms, "
            "l.expires_at_ms, e.kind FROM core_lease l JOIN core_workitem w "
            "ON w.id = l.work_item_id JOIN core_executor e ON e.id = l.holder_id"
        ).fetchall()
        events = conn.execute(
            "SELECT lease_id::text, kind, min(id) FROM core_leaseevent "
            "WHERE kind IN ('granted', 'released', 'revoked', 'expired') GROUP BY lease_id, kind"
        ).fetchall()
        alerts = conn.execute(
            "SELECT lease_id::text, epoch, kind, dedupe_key FROM core_alert "
            "WHERE kind IN ('expired', 'standing_lapsed')"
        ).fetchall()
        now_ms = conn.execute(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        ).fetchone()[0]
    return {
        "1_no_effect_below_high_water": check_high_water(ledger, leases),
        "2_one_live_holder": check_standing(leases, events),
        "3_attempts_in_ledger": check_ledger(ledger, records),
        "4_expiry_alerted_once": check_alerts(leases, alerts, now_ms),
    }


def check_high_water(ledger: list[tuple], leases: list[tuple]) -> dict[str, Any]:
    """Replay the accepted log per work item in commit (= id, see recipient.py) order."""
    mark: dict[str, int] = {}
    epochs = {(key, epoch) for _, key, epoch, *_ in leases}
    c: Counter = Counter()
    for _id, _attempt, key, epoch, high_water, status, code, _kind in ledger:
        if status == "accepted":
            c["accepted"] += 1
            if high_water != epoch:  # the guard reported a mark other than this epoch
                c["accepted_mark_mismatch"] += 1
            if key in mark and epoch < mark[key]:
                c["accepted_below_mark"] += 1
            if epoch > mark.get(key, -1):
                if key in mark:
                    c["mark_raised"] += 1
                mark[key] = epoch
            if (key, epoch) not in epochs:
                c["accepted_unknown_epoch"] += 1
        else:
            c["refused"] += 1
            if code == "stale_epoch":
                c["refused_stale_epoch"] += 1
                if epoch is not None and key in mark and epoch >= mark[key]:
                    c["stale_refusal_not_below_mark"] += 1
            else:
                c[f"refused_{code}"] += 1
    c["work_items"] = len(mark)
    ok = (
        c["accepted_below_mark"] == 0
        and c["accepted_unknown_epoch"] == 0
        and c["accepted_mark_mismatch"] == 0
        and c["accepted"] > 0
    )
    return {"ok": ok, **dict(c)}


def check_standing(leases: list[tuple], events: list[tuple] | None = None) -> dict[str, Any]:
    """Consecutive epochs of one work item never overlap in standing.

    Proof by commit order: the predecessor's end event (expired, released or revoked) must
    precede the successor's grant event. Event ids come from one sequence, taken inside
    each writing transaction while it holds the lease's lock, so their order is the order
    of the writes. The recorded times must agree: [granted_at_ms, end), with end =
    expires_at_ms for an expired lease and ended_at_ms otherwise, never overlap
    (`overlaps_recorded_times`). (That check found lease times taken from now(), the
    transaction's start, before a wait for the row lock; the clock is now read after.)
    """
    event_id = {(lease_id, kind): eid for lease_id, kind, eid in (events or [])}
    by_item: dict[str, list[tuple]] = defaultdict(list)
    for row in leases:
        by_item[row[1]].append(row)
    c: Counter = Counter()
    examples = []
    max_skew = 0
    for key, rows in by_item.items():
        rows.sort(key=lambda r: r[2])  # by epoch
        for r in rows:
            c["leases"] += 1
            c[f"state_{r[3]}"] += 1
            c[f"holder_{r[7]}"] += 1
        for a, b in zip(rows, rows[1:], strict=False):
            c["pairs_checked"] += 1
            a_id, _, a_epoch, a_state, a_granted, a_ended, a_expires, _ = a
            b_id, _, b_epoch, _, b_granted, *_ = b
            if b_granted < a_granted:
                c["epoch_order_differs_from_grant_order"] += 1
            if a_state in ("expired", "released", "revoked"):
                c[f"pairs_after_{a_state}"] += 1
                ended = event_id.get((a_id, a_state))
                granted = event_id.get((b_id, "granted"))
                if ended is None or granted is None:
                    c["events_missing"] += 1
                elif granted < ended:
                    c["granted_before_predecessor_ended"] += 1
                    if len(examples) < 5:
                        examples.append(f"{key}: epoch {b_epoch} granted before {a_epoch} ended")
                end_ms = a_expires if a_state == "expired" else a_ended
                if end_ms is not None and b_granted < end_ms:
                    c["overlaps_recorded_times"] += 1
                    max_skew = max(max_skew, end_ms - b_granted)
            else:
                c["successor_of_live_lease"] += 1
    if max_skew:
        c["overlaps_recorded_times_max_ms"] = max_skew
    bad = (
        "granted_before_predecessor_ended",
        "successor_of_live_lease",
        "events_missing",
        "epoch_order_differs_from_grant_order",
        "overlaps_recorded_times",
    )
    ok = all(c[k] == 0 for k in bad) and c["leases"] > 0
    return {"ok": ok, **dict(c), "examples": examples}


def check_ledger(ledger: list[tuple], records: list[dict[str, Any]]) -> dict[str, Any]:
    rows = {attempt: status for _id, attempt, _k, _e, _h, status, *_ in ledger}
    results = {r["attempt"]: r for r in records if r.get("ev") == "result"}
    c: Counter = Counter()
    missing = []
    attempts = [r for r in records if r.get("ev") == "attempt"]
    for a in attempts:
        res = results.get(a["attempt"])
        kind = res["result"] if res else "no_result"  # no result: the agent was SIGKILLed
        row = rows.get(a["attempt"])
        if kind == "connect_failed":
            c["not_attempted_connect_failed"] += 1
            if row is not None:
                c["connect_failed_but_in_ledger"] += 1
        elif kind in ("accepted", "refused"):
            c["definite"] += 1
            if row is None:
                c["definite_missing"] += 1
                if len(missing) < 5:
                    missing.append(a["attempt"])
            elif row != kind:
                c["definite_status_mismatch"] += 1
            else:
                c[f"definite_{kind}"] += 1
        else:
            c["indeterminate"] += 1
            c["indeterminate_in_ledger" if row is not None else "indeterminate_not_in_ledger"] += 1
    known = {a["attempt"] for a in attempts}
    c["ledger_rows"] = len(rows)
    c["ledger_rows_without_agent_record"] = sum(1 for k in rows if k not in known)
    ok = (
        c["definite_missing"] == 0
        and c["definite_status_mismatch"] == 0
        and c["connect_failed_but_in_ledger"] == 0
        and c["ledger_rows_without_agent_record"] == 0
        and c["definite"] > 0
    )
    return {"ok": ok, **dict(c), "missing_examples": missing}


def check_alerts(leases: list[tuple], alerts: list[tuple], now_ms: int) -> dict[str, Any]:
    per_lease: dict[str, list[tuple]] = defaultdict(list)
    for lease_id, epoch, kind, dedupe in alerts:
        per_lease[lease_id].append((epoch, kind, dedupe))
    c: Counter = Counter()
    examples = []
    lease_ids = set()
    for lease_id, _key, epoch, state, _g, _e, expires_at_ms, holder_kind in leases:
        lease_ids.add(lease_id)
        mine = per_lease.get(lease_id, [])
        if state == "expired":
            c["expired_leases"] += 1
            want = "standing_lapsed" if holder_kind == "human" else "expired"
            good = [a for a in mine if a[2] == f"{want}:{lease_id}:{epoch}" and a[0] == epoch]
            if len(mine) == 1 and len(good) == 1:
                c[f"alerted_once_{want}"] += 1
            elif not mine:
                c["expired_without_alert"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id} expired without an alert")
            else:
                c["expired_alerted_wrongly"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id}: alerts {mine}")
        else:
            if mine:
                c[f"expiry_alert_on_{state}_lease"] += 1
                if len(examples) < 5:
                    examples.append(f"lease {lease_id} is {state} but has {mine}")
            if state in ("active", "jeopardy") and expires_at_ms < now_ms:
                c["live_past_expiry_after_final_sweep"] += 1
    c["alerts_without_lease"] = sum(1 for k in per_lease if k not in lease_ids)
    bad = (
        "expired_without_alert",
        "expired_alerted_wrongly",
        "live_past_expiry_after_final_sweep",
        "alerts_without_lease",
    )
    ok = all(c[k] == 0 for k in bad) and not any(k.startswith("expiry_alert_on_") for k in c)
    return {"ok": ok and c["expired_leases"] > 0, **dict(c), "examples": examples}


def print_report(out: dict[str, Any]) -> None:
    print("\n=== chaos: faults injected ===")
    for k, v in out["faults"].items():
        print(f"  {k:32} {v}")
    print("=== chaos: activity (agent logs) ===")
    for k, v in out["activity"].items():
        print(f"  {k:32} {v}")
    notices = out.get("epoch_notices") or {}
    if notices.get("registered"):
        print("=== chaos: epoch-advance notices (to late_notified) ===")
        for k, v in notices.items():
            if k != "registered":
                print(f"  {k:40} {v}")
    print("=== chaos: checks ===")
    for name, res in out["checks"].items():
        print(f"  [{'PASS' if res['ok'] else 'FAIL'}] {name}")
        for k, v in res.items():
            if k != "ok" and v not in ([], None):
                print(f"        {k:40} {v}")
    print(f"=== chaos: {'ALL CHECKS PASS' if out['ok'] else 'SOME CHECKS FAILED'} ===", flush=True)
