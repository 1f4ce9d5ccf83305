"""The HA chaos run's figures and verdict (`make ha-chaos`, bench/ha/chaos.py): what the
final primary and the recipients hold against what the agents, the SDK fleet and the probe
were acknowledged; stale acceptances, fencing orders with two holders, acknowledged writes
lost, write outages per fault. Reads the databases with psycopg; no Django import here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from bench.chaos.recipient import LATE_ROLES, TABLES
from bench.faults_fleet import Record
from bench.ha.chaos_faults import ClusterFaults
from bench.ha.cluster import Cluster
from bench.ha.probe import Probe

# (work item key, generation, epoch): the lease ids given that fencing order.
Holders = defaultdict[tuple, set[str]]


@dataclass
class FinalPrimary:
    """What the final primary has: its leases, effects, alerts and lease events."""

    has_generation: bool
    leases: list[tuple]  # (work item key, generation, epoch, lease id)
    effect_ids: set[str]
    alert_rows: list[tuple]  # (kind, cause, count)
    recoveries: list[str]
    events: dict[str, int]


def read_final_primary(db_url: str) -> FinalPrimary:
    import psycopg

    with psycopg.connect(db_url, autocommit=True, connect_timeout=5) as conn:
        has_generation = bool(
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_name = 'core_lease' "
                "AND column_name = 'generation'"
            ).fetchone()
        )
        generation = "l.generation" if has_generation else "0"
        leases = conn.execute(
            f"SELECT w.key, {generation}, l.epoch, l.id::text FROM core_lease l "
            "JOIN core_workitem w ON w.id = l.work_item_id"
        ).fetchall()
        effect_ids = {r[0] for r in conn.execute("SELECT id::text FROM core_effect")}
        # What the sweeps made of the outages (docs/design.md §14): alerts by kind and
        # cause, and the leases that went to jeopardy and came back by a renewal.
        alert_rows = conn.execute(
            "SELECT kind, coalesce(detail->>'cause', ''), count(*) FROM core_alert "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        recoveries = [
            r[0] for r in conn.execute(
                "SELECT message FROM core_alert WHERE kind = 'recovery' ORDER BY id"
            )
        ]  # fmt: skip
        events: dict[str, int] = dict(
            conn.execute(
                "SELECT kind, count(*) FROM core_leaseevent "
                "WHERE kind IN ('jeopardy', 'recovered', 'expired') GROUP BY kind"
            ).fetchall()
        )
    return FinalPrimary(has_generation, leases, effect_ids, alert_rows, recoveries, events)


def primary_and_agent_holders(final: FinalPrimary, records: list[dict[str, Any]]) -> Holders:
    """Who holds each fencing order on the final primary and in the agents' grants and
    effects."""
    holders: Holders = defaultdict(set)
    for key, gen, epoch, lease in final.leases:
        holders[(key, gen or 0, epoch)].add(lease)
    for r in records:
        if r.get("ev") in ("grant", "effect") and r.get("order"):
            holders[(r["key"], *r["order"])].add(r["lease"])
    return holders


def acknowledged_lost(
    final: FinalPrimary, sdk: Record, records: list[dict[str, Any]]
) -> tuple[Counter, list[str]]:
    """The grants and effects answered 2xx (SDK fleet, chaos agents) the final primary
    does not have, by kind, and examples."""
    lease_ids = {lease for *_, lease in final.leases}
    lost: Counter = Counter()
    examples: list[str] = []
    sdk_kinds = [("sdk_grants", "sdk grant", sdk.grants, lease_ids),
                 ("sdk_effects", "sdk effect", sdk.effects, final.effect_ids)]  # fmt: skip
    for what, label, ids, have in sdk_kinds:
        for one in ids:
            if one not in have:
                lost[what] += 1
                examples.append(f"{label} {one}")
    for r in records:
        ev = r.get("ev")
        if ev == "grant" and r["lease"] not in lease_ids:
            lost["grants"] += 1
            examples.append(f"grant {r['lease']}")
        elif ev == "effect" and r["effect"] not in final.effect_ids:
            lost["effects"] += 1
            examples.append(f"effect {r['effect']}")
    return lost, examples


def stale_acceptances(recipient_db_url: str, holders: Holders) -> tuple[int, list[str]]:
    """Effects a recipient accepted below a fencing order it had already accepted for that
    work item, and examples; each acceptance's order goes into `holders`."""
    import psycopg

    stale = 0
    examples: list[str] = []
    with psycopg.connect(recipient_db_url, connect_timeout=5) as rconn:
        for role in ("main", *LATE_ROLES):
            mark: dict[str, tuple[int, int]] = {}
            for key, gen, epoch, lease in rconn.execute(
                f"SELECT work_key, generation, epoch, lease_id FROM {TABLES[role][0]} "
                "WHERE status = 'accepted' ORDER BY id"
            ):
                order = (gen or 0, epoch)
                holders[(key, *order)].add(lease)
                if key in mark and order < mark[key]:
                    stale += 1
                    examples.append(f"{role}: {key} {order} below {mark[key]}")
                mark[key] = max(order, mark.get(key, order))
    return stale, examples


def note_outages(done: list[dict[str, Any]], probe: Probe | None, records: list[dict]) -> None:
    """Each fault done gets the probe's write outage around it and what the agents saw
    from the fault until it was over (healthy again, or 5 s after a thaw): refused or
    failed acquisitions and holdings lost."""
    for i, fault in enumerate(done):
        until = done[i + 1]["at"] if i + 1 < len(done) else None
        gap = probe.gap_around(fault["at"], until) if probe is not None else None
        fault["write_outage_s"] = None if gap is None else round(gap, 2)
        start, end = fault.pop("wall"), fault.pop("wall_end")
        seen = Counter(
            r["ev"] for r in records
            if r.get("ev") in ("acquire_error", "lost", "grant") and start <= r["t"] <= end
        )  # fmt: skip
        fault["agents_meanwhile"] = dict(seen)
        fault["at"] = round(fault["at"], 1)


def sdk_figures(sdk: Record, agents: int) -> dict[str, Any]:
    return {
        "agents": agents,
        "grants": len(sdk.grants),
        "effects": len(sdk.effects),
        "holdings_in_local_jeopardy": sdk.jeopardy_entered,
        "holdings_resumed_from_jeopardy": sdk.jeopardy_resumed,
        "holdings_lost": dict(sdk.lost_to_outage),
        "answers": dict(sorted(sdk.statuses.items())),
        "html_or_500": sum(
            n for what, n in sdk.statuses.items() if "html" in what or what[:3] == "500"
        ),
        "slowest_answer_s": round(sdk.slowest_s, 2),
    }


def ha_figures(
    records: list[dict[str, Any]],
    *,
    db_url: str,
    recipient_db_url: str,
    cluster: Cluster,
    timeline_at_start: int | None,
    faults: ClusterFaults,
    probe: Probe | None,
    sdk: Record,
    sdk_agents: int,
) -> dict[str, Any]:
    """The run's `ha` figures (bench/ha/chaos.py's docstring says what each means); the
    final primary is the cluster's, `db_url` through HAProxy."""
    final = read_final_primary(db_url)
    holders = primary_and_agent_holders(final, records)
    lost, lost_examples = acknowledged_lost(final, sdk, records)
    stale, stale_examples = stale_acceptances(recipient_db_url, holders)
    two = {k: sorted(v) for k, v in holders.items() if len(v) > 1}
    lost["probe_writes"] = probe.lost(db_url) if probe is not None else 0
    timeline = cluster.timeline()
    note_outages(faults.done, probe, records)
    return {
        "failovers": (timeline or 0) - (timeline_at_start or 0),
        "stale_accepted": stale,
        "same_order_two_holders": len(two),
        "acknowledged_lost": sum(lost.values()),
        "max_write_outage_s": round(probe.max_gap(), 2) if probe else None,
        "lost": dict(lost),
        "examples": {"stale": stale_examples[:5], "two_holders": list(two.items())[:5],
                     "lost": lost_examples[:5]},
        "acknowledged": {"grants": sum(1 for r in records if r.get("ev") == "grant"),
                         "effects": sum(1 for r in records if r.get("ev") == "effect"),
                         "probe_writes": len(probe.acked) if probe else 0},
        "probe": {"unknown": probe.unknown, "failed": probe.failed} if probe else {},
        "faults": faults.done,
        "skipped": faults.skipped,
        "errors": faults.errors,
        "second_primary_acked_writes": faults.second_primary_acked_writes,
        "both_claimed_primary_samples": faults.both_claimed_primary_samples,
        "old_primary_back_as_replica_s": faults.old_primary_back_as_replica_s,
        "sdk_fleet": sdk_figures(sdk, sdk_agents),
        "lease_generation_column": final.has_generation,
        "alerts": {f"{kind}{' (' + cause + ')' if cause else ''}": n
                   for kind, cause, n in final.alert_rows},
        "recovery_alerts": final.recoveries,
        "lease_events": final.events,
        "strict": cluster.strict,
    }  # fmt: skip


def ha_line(ha: dict[str, Any]) -> str:
    return (
        f"ha: failovers={ha['failovers']} stale_accepted={ha['stale_accepted']} "
        f"same_order_two_holders={ha['same_order_two_holders']} "
        f"acknowledged_lost={ha['acknowledged_lost']} max_write_outage_s={ha['max_write_outage_s']}"
    )


def ha_ok(ha: dict[str, Any]) -> bool:
    return (
        ha["stale_accepted"] == 0
        and ha["same_order_two_holders"] == 0
        and ha["acknowledged_lost"] == 0
        and ha["second_primary_acked_writes"] == 0
        and not ha["errors"]
        and ("freeze_node" not in [f["fault"] for f in ha["faults"]]
             or ha["old_primary_back_as_replica_s"] is not None)
    )  # fmt: skip
