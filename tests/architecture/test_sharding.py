"""Ready for sharding (issue 32, item 4): every statement the hot paths and one sweep batch
send to PostgreSQL is keyed by the work item, the column a Citus deployment would
distribute the per-work tables on, or batched by work item ids, or names only tables that
every node can hold whole. The statements are recorded against the real test database
(CaptureQueriesContext), not read from the code, so a new statement on a hot path is
checked the day it appears.

A statement touching a KEYED table passes when it
- inserts into it with `work_item_id` among the columns (Citus routes an INSERT by the
  distribution column's value; an INSERT ... SELECT FROM unnest(...) by each row's), or
- filters it by the key against a value: `work_item_id = <value>`, `work_item_id IN
  (<values>)`, `work_item_id = ANY(<array>)`, or for core_workitem itself its `id`.
A correlated subquery (`U0.work_item_id = core_workitem.id`) is co-located with its outer
row and needs no key of its own once the outer statement has one.

The statements that address the work by another name, the lease id, the effect id or the
work key an agent sends, are listed in ENTRY with the reason and what would route them:
the list may only shrink (an entry no statement matches fails, like the room sizes).
docs/deployment.md ("Sharding") gives the distribution column per table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import (
    Alert,
    AlertSnooze,
    AuditEntry,
    AuditHead,
    Checkpoint,
    Effect,
    EffectRule,
    EpochNotice,
    Executor,
    FencingKey,
    GlobalPolicy,
    Lease,
    LeaseEvent,
    Queue,
    Recipient,
    WorkItem,
)
from leaseboard.sweeps.models import MetricCounter, SweepState
from tests.builders import admit, age_leases, leased_item

pytestmark = pytest.mark.django_db(transaction=True)

# Distributed by the work item: one row per piece of work or per thing done under it, as
# many as the fleet is large and growing with it. core_workitem on its `id`, the others
# on `work_item_id`, co-located, so a lease, its events, its effects and its checkpoints
# live on the shard of their work item and a grant's one statement stays on one node.
KEYED = {
    WorkItem._meta.db_table: "id: the work item itself",
    Lease._meta.db_table: "work_item_id: the leases on the work item, one live",
    LeaseEvent._meta.db_table: "work_item_id: the append-only history of those leases",
    Effect._meta.db_table: "work_item_id: the effects proposed under those leases",
    Checkpoint._meta.db_table: "work_item_id: the checkpoints saved under those leases",
    EpochNotice._meta.db_table: "work_item_id: one notice per recipient and epoch raised",
}

# Reference tables (copied whole to every node): small, read on every request, changed by
# people, not by the fleet's traffic.
REFERENCE = {
    Queue._meta.db_table: "tens of queues, read for timing and policy version on each grant",
    Executor._meta.db_table: "agents and people: one row per credential, not per work",
    EffectRule._meta.db_table: "the queues' effect rules, changed by a policy change",
    GlobalPolicy._meta.db_table: "one row: the global default decision",
    FencingKey._meta.db_table: "a few signing keys, rotated by hand",
    Recipient._meta.db_table: "the recipients that check tokens: tens",
}

# Local to the coordinator (one table on one node, not distributed): written at the rate
# of events rather than of renewals, and with rows that belong to no work item, so they
# cannot live on a work item's shard.
COORDINATOR = {
    Alert._meta.db_table: "alerts: expiries, stale effects; a recovery alert names no work",
    AlertSnooze._meta.db_table: "snoozes people set on alert kinds",
    AuditHead._meta.db_table: "the audit chain's head: one order for the whole deployment",
    AuditEntry._meta.db_table: "the hash-chained audit log, in that one order",
    SweepState._meta.db_table: "one row: the sweep clock",
    MetricCounter._meta.db_table: "a few counters per metric",
}

# Statements that address the work by the name the caller holds, not its id: (path, a
# regular expression the statement matches) -> why, and what would route it.
ENTRY = {
    ("acquire", r'FROM "core_workitem" .*WHERE "core_workitem"\."key" = '): (
        "the agent names work by its key. Routed by a key -> id lookup in a reference of "
        "keys, or by distributing on a hash of the key (docs/deployment.md, Sharding)"
    ),
    ("renew", r"UPDATE core_lease AS l .* WHERE l\.id = v\.lid"): (
        "the agent renews by lease id. Routed once the lease id carries its work item id "
        "(a lease id minted from the work item's id), then `AND l.work_item_id = ...`"
    ),
    ("batch renew", r"UPDATE core_lease AS l .* WHERE l\.id = v\.lid"): (
        "as renew, with `work_item_id = ANY(...)` from the ids (a multi-shard statement "
        "until then: Citus runs it on every shard the batch touches, in parallel)"
    ),
    ("effect", r'FROM "core_lease" .*WHERE "core_lease"\."id" = %s FOR NO KEY UPDATE'): (
        "the agent proposes under a lease id: routed as renew would be"
    ),
    ("outcome", r'FROM "core_effect" .*WHERE "core_effect"\."id" = .* FOR NO KEY UPDATE'): (
        "the agent reports by effect id: routed once the effect id carries its work item "
        "id as the lease id would; every later statement of the report is keyed"
    ),
    ("release", r'FROM "core_lease" .*WHERE "core_lease"\."id" = .* FOR NO KEY UPDATE'): (
        "the agent releases by lease id: routed as renew would be"
    ),
    # The sweep batch (sweeps/batch.py): the claim by due time; every write after it is
    # keyed by the claimed rows' work item ids.
    ("sweep batch", r'FROM "core_lease" .*WHERE .*"core_lease"\."due_at_ms" <= .*SKIP LOCKED'): (
        "the claim scans every shard by due time, by design: in a Citus deployment each "
        "worker node sweeps its own shards (the claim with no key runs on every shard)"
    ),
}

TRANSACTION = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE SAVEPOINT)\b", re.I)
APPS = "core|sweeps|policy|takeovers|sandbox|auth|django"  # every table has its app's prefix
TABLE = re.compile(rf'\b(?:FROM|JOIN|UPDATE|INTO)\s+"?((?:{APPS})_\w+)"?', re.I)
INSERT = re.compile(r'\bINSERT INTO\s+"?(\w+)"?\s*\(([^)]*)\)', re.I)
VALUE = r"(?:%s|-?\d+|'[^']*'(?:::\w+)?)"
KEY = re.compile(
    rf'(?:\bwork_item_id"?\s*(?:=\s*{VALUE}|IN\s*\(\s*{VALUE}|=\s*ANY\s*\()'
    rf'|"core_workitem"\."id"\s*(?:=\s*{VALUE}|IN\s*\()'
    rf"|\bUPDATE core_workitem SET .*? WHERE id = {VALUE})",
    re.I | re.S,
)


def tables_of(statement: str) -> set[str]:
    return {name.lower() for name in TABLE.findall(statement)}


def verdict(statement: str) -> str:
    """'' when the statement is keyed (or touches no keyed table), else why not."""
    tables = tables_of(statement)
    unknown = tables - KEYED.keys() - REFERENCE.keys() - COORDINATOR.keys()
    if unknown:
        return f"touches tables this test does not classify: {sorted(unknown)}"
    keyed = tables & KEYED.keys()
    inserted = {
        table.lower(): cols for table, cols in INSERT.findall(statement) if table.lower() in KEYED
    }
    for table, cols in inserted.items():
        if "work_item_id" not in cols and table != WorkItem._meta.db_table:
            return f"inserts into {table} without work_item_id"
    if keyed - inserted.keys() and not KEY.search(statement):
        return f"touches {sorted(keyed - inserted.keys())} without a work item key"
    return ""


def test_the_classifier_sees_a_key_and_its_absence() -> None:
    keyed = 'SELECT 1 FROM "core_effect" WHERE "core_effect"."work_item_id" = 7 LIMIT 1'
    batched = 'UPDATE "core_lease" SET x = 1 WHERE "core_lease"."work_item_id" IN (1, 2)'
    correlated_only = (
        'SELECT (SELECT U0."id" FROM "core_lease" U0 WHERE U0."work_item_id" = '
        '("core_workitem"."id")) FROM "core_workitem" WHERE "core_workitem"."key" = %s'
    )
    assert verdict(keyed) == verdict(batched) == ""
    assert "without a work item key" in verdict(correlated_only)
    assert "without work_item_id" in verdict("INSERT INTO core_effect (id, kind) VALUES (1, 2)")
    assert "does not classify" in verdict('SELECT 1 FROM "takeovers_takeoverrequest"')
    assert verdict('SELECT "core_queue"."name" FROM "core_queue" WHERE id = 1') == ""


def _record(name: str, call: Callable[[], Any], into: list[tuple[str, str]]) -> Any:
    with CaptureQueriesContext(connection) as captured:
        result = call()
    into += [(name, q["sql"] or "") for q in captured.captured_queries]
    return result


def _statements(agent: Any) -> list[tuple[str, str]]:
    """The statements of each hot path and of one sweep batch, in order."""
    from leaseboard.core.services import effects
    from leaseboard.core.services.leases import (
        lease_acquire,
        lease_release,
        lease_renew,
        lease_renew_many,
    )
    from leaseboard.sweeps.batch import sweep_batch
    from leaseboard.sweeps.report import SweepReport

    executor, _ = agent()
    leases = [leased_item(executor) for _ in range(3)]
    admit("shard-acquire")
    seen: list[tuple[str, str]] = []
    _record("acquire", lambda: lease_acquire(work_key="shard-acquire", executor=executor), seen)
    _record("renew", lambda: lease_renew(lease_id=leases[0].id, executor=executor, epoch=1), seen)
    _record(
        "batch renew",
        lambda: lease_renew_many(executor=executor, items=[(lease.id, 1) for lease in leases]),
        seen,
    )
    effect = _record(
        "effect",
        lambda: effects.effect_propose(
            lease_id=leases[0].id, executor=executor, epoch=1, kind="shard.k", target="t",
            idempotency_key="shard-1",
        ),
        seen,
    )  # fmt: skip
    assert effect.decision == Effect.Decision.AUTHORIZED
    _record(
        "outcome",
        lambda: effects.effect_report_outcome(
            effect_id=effect.id, executor=executor, outcome="applied"
        ),
        seen,
    )
    _record(
        "release", lambda: lease_release(lease_id=leases[1].id, executor=executor, epoch=1), seen
    )
    age_leases(10**8)  # every live lease far past its expiry: the batch expires them
    report = SweepReport()
    _record(
        "sweep batch",
        lambda: sweep_batch(batch_size=50, window=None, report=report, before_write=None),
        seen,
    )
    assert report.expired >= 2
    return seen


def test_hot_path_and_sweep_statements_are_keyed_by_the_work_item(agent: Any) -> None:
    seen = _statements(agent)
    paths = {name for name, _ in seen}
    assert paths == {
        "acquire", "renew", "batch renew", "effect", "outcome", "release", "sweep batch"
    }  # fmt: skip
    used: set[tuple[str, str]] = set()
    unkeyed = []
    checked = 0
    for name, statement in seen:
        if TRANSACTION.match(statement) or not tables_of(statement):
            continue  # BEGIN/COMMIT, the clock, set_config: no table
        checked += 1
        why = verdict(statement)
        if not why:
            continue
        entry = next((k for k in ENTRY if k[0] == name and re.search(k[1], statement, re.S)), None)
        if entry is not None:
            used.add(entry)
            continue
        unkeyed.append(f"{name}: {why}: {statement[:300]}")
    assert checked >= 20, checked  # the sweep's expiry is one statement for the batch
    assert not unkeyed, "\n".join(unkeyed)
    assert used == set(ENTRY), f"ENTRY names statements no path sends: {set(ENTRY) - used}"
