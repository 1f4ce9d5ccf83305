"""Commit-time policy cost: decisions per second with 50 rules per queue, beside baselines
measured in the same run, so rule evaluation never becomes the hot path's bottleneck.

    .venv/bin/python bench/bench_policy.py [--seconds 2] [--rules 50]

Pure (no database), in one process:
  baseline     the kind-only lookup the rules replaced (exact kind, prefix.*, *)
  first        50 rules, the first one matches (glob only)
  globs        50 rules, none matches on kind: 50 glob tests, then the default
  conditions   50 rules on the same kind glob, each with a CEL condition, none true:
               50 condition evaluations, then the default (the worst case)
  explain      the same as `conditions`, recording every step (the explain view)
  layered      `conditions` behind the rules for every queue (decide_layered): none of
               them, then 10 whose kind globs do not match
Through core (a scratch PostgreSQL database, BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/leaseboard_bench_policy, migrated if new):
  pk read      one primary-key read of the queue (what every decision costs at least: the
               old EffectPolicy lookup was one query too)
  decide       effect_policy_decide on the `conditions` rule set (version read, cached
               compiled set, facts incl. one checkpoint query, 50 evaluations), without
               and then with 10 rules for every queue in front of it
Not a test: numbers vary by machine; run on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import (
    BENCH_AUDIT_KEY,
    BENCH_FENCING_KEK,
    PG,
    ensure_database,
    sayer,
    setup_django,
)

say = sayer("policy")


def rate(fn: Callable[[], object], seconds: float) -> float:
    for _ in range(50):
        fn()  # warm up
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            fn()
        n += 100
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def kind_only(kind: str, rules: dict[str, str], default: str = "allow") -> str:
    """The lookup the kind-only EffectPolicy did (leaseboard.domain.reconciliation before
    the rules): exact kind, then prefix.* from the longest prefix, then *."""
    if kind in rules:
        return rules[kind]
    parts = kind.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        pattern = ".".join(parts[:cut]) + ".*"
        if pattern in rules:
            return rules[pattern]
    return rules.get("*", default)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rules", type=int, default=50)
    parser.add_argument("--no-db", action="store_true", help="only the pure measurements")
    args = parser.parse_args()
    n, secs = args.rules, args.seconds

    from leaseboard.domain.expressions import activation
    from leaseboard.domain.policy import RuleSpec, decide, decide_layered, rule_set_compiled

    facts = {
        "payload": {"amount_cents": 4200, "currency": "EUR", "items": [1, 2, 3]},
        "effect.kind": "payment.refund",
        "effect.target": "order-1",
        "evidence.checkpoint_age_s": 12,
        "evidence.has_checkpoint": True,
    }
    first = rule_set_compiled(
        [RuleSpec(f"r{i}", "payment.*" if i == 0 else f"other{i}.*") for i in range(n)], "allow"
    )
    globs = rule_set_compiled([RuleSpec(f"r{i}", f"other{i}.*") for i in range(n)], "allow")
    conditions = rule_set_compiled(
        [
            RuleSpec(
                f"r{i}",
                "payment.*",
                when=f"payload.amount_cents > {100000 + i} && evidence.checkpoint_age_s < 300",
                decision="require_approval",
            )
            for i in range(n)
        ],
        "allow",
    )
    old = {f"other{i}.*": "deny" for i in range(n - 1)} | {"payment.refund": "allow"}

    def run(rule_set, explain=False):  # type: ignore[no-untyped-def]
        return lambda: decide(
            rule_set,
            kind="payment.refund",
            target="order-1",
            activation=lambda: activation(facts),
            explain=explain,
        )

    no_global = rule_set_compiled([], "allow")
    ten_global = rule_set_compiled(
        [RuleSpec(f"g{i}", f"elsewhere{i}.*", decision="deny") for i in range(10)], "allow"
    )

    def layered(outer):  # type: ignore[no-untyped-def]
        return lambda: decide_layered(
            outer,
            conditions,
            kind="payment.refund",
            target="order-1",
            activation=lambda: activation(facts),
        )

    assert run(conditions)().rule is None and run(first)().rule == "r0"
    assert layered(ten_global)().ruling.decision == "allow"
    results = [
        ("baseline: kind-only lookup", rate(lambda: kind_only("payment.refund", old), secs)),
        (f"{n} rules, the first matches", rate(run(first), secs)),
        (f"{n} rules, no glob matches", rate(run(globs), secs)),
        (f"{n} rules, {n} CEL conditions, none true", rate(run(conditions), secs)),
        (f"explain, {n} CEL conditions", rate(run(conditions, explain=True), secs)),
        (f"layered: no rules for every queue, then {n} conditions", rate(layered(no_global), secs)),
        (
            f"layered: 10 rules for every queue, then {n} conditions",
            rate(layered(ten_global), secs),
        ),
    ]
    if not args.no_db:
        results += _through_core(conditions, facts, secs)
    width = max(len(name) for name, _ in results)
    print(f"\ncommit-time policy, {n} rules per queue ({secs:.0f} s each, one process):")
    for name, per_s in results:
        print(f"  {name:<{width}}  {per_s:>12,.0f} decisions/s  {1e6 / per_s:>9.1f} µs each")


def _through_core(conditions, facts, secs):  # type: ignore[no-untyped-def]
    url = os.environ.get("BENCH_DATABASE_URL", f"{PG}/leaseboard_bench_policy")
    ensure_database(url)
    setup_django(
        DATABASE_URL=url,
        LEASEBOARD_AUDIT_KEY=BENCH_AUDIT_KEY,
        LEASEBOARD_FENCING_KEK=BENCH_FENCING_KEK,
    )
    from django.core.management import call_command
    from django.db import transaction

    call_command("migrate", verbosity=0)
    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import EffectRule, Executor, Lease, Queue, WorkItem
    from leaseboard.core.services.executors import agent_create
    from leaseboard.core.services.leases import lease_acquire
    from leaseboard.core.services.policy import effect_policy_decide
    from leaseboard.core.services.work import work_admit

    say("preparing a queue with the rule set in " + url.rsplit("/", 1)[-1])
    with transaction.atomic():
        queue, _ = Queue.objects.get_or_create(name="bench-policy")
        EffectRule.objects.filter(queue=queue).delete()
        EffectRule.objects.bulk_create(
            EffectRule(
                queue=queue,
                position=i,
                name=r.spec.name,
                kind=r.spec.kind,
                target=r.spec.target,
                condition=r.spec.when,
                decision=r.spec.decision,
            )
            for i, r in enumerate(conditions.rules, 1)
        )
        Queue.objects.filter(id=queue.id).update(policy_version=queue.policy_version + 1)
    agent = Executor.objects.filter(name="bench-policy-agent").first()
    if agent is None:
        agent = agent_create(
            name="bench-policy-agent", queues=["bench-policy"], actor_name="bench"
        )[0]
    key = f"bench-policy-{int(time.time())}"
    work_admit(key=key, queue_name="bench-policy", by=None)
    lease = lease_acquire(work_key=key, executor=agent).lease
    item = WorkItem.objects.get(key=key)
    lease = Lease.objects.get(id=lease.id)
    now = db_now_ms()

    def decide_once() -> object:
        return effect_policy_decide(
            item=item,
            lease=lease,
            executor=agent,
            kind="payment.refund",
            target="order-1",
            payload=facts["payload"],
            now_ms=now,
        )

    assert decide_once().decision == "allow"  # type: ignore[attr-defined]

    def pk_read() -> object:
        return Queue.objects.filter(id=item.queue_id).values_list("policy_version").first()

    from leaseboard.core.services.rule_sets import policy_caches_forget
    from leaseboard.domain.policy import RuleSpec
    from leaseboard.policy.services.common import cli_actor
    from leaseboard.policy.services.rules import rule_set_change

    actor = cli_actor("cli:bench")
    rule_set_change(queue_name=None, rules=[], default="allow", actor=actor)
    policy_caches_forget()
    results = [
        ("baseline: one primary-key read (PostgreSQL)", rate(pk_read, secs)),
        (f"effect_policy_decide, {len(conditions.rules)} CEL conditions", rate(decide_once, secs)),
    ]
    ten = [RuleSpec(f"g{i}", f"elsewhere{i}.*", decision="deny") for i in range(10)]
    rule_set_change(queue_name=None, rules=ten, default="allow", actor=actor)
    assert decide_once().decision == "allow"  # type: ignore[attr-defined]
    results.append(
        (
            "the same behind 10 rules for every queue",
            rate(decide_once, secs),
        )
    )
    rule_set_change(queue_name=None, rules=[], default="allow", actor=actor)
    return results


if __name__ == "__main__":
    main()
