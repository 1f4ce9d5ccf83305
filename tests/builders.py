"""Test data, built through the core services (or in SQL where a test needs thousands of
rows or needs time to pass). Plain functions: import each one by name where it is used.
Fixtures live in the conftest.py files, not here."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from django.db import connection

from leaseboard.domain.policy import RuleSpec

if TYPE_CHECKING:
    from leaseboard.core.models import Effect, Executor, Lease, WorkItem

PASSWORD = "correct-horse-battery-staple"
_seq = itertools.count(1)

LEASE_TIME_COLUMNS = (
    "granted_at_ms",
    "renewed_at_ms",
    "jeopardy_at_ms",
    "expires_at_ms",
    "due_at_ms",
    "max_expires_at_ms",
)


# -- people ----------------------------------------------------------------------------


def ensure_role_groups() -> None:
    # Transactional tests truncate tables, so the migration's groups may be gone.
    from django.contrib.auth.models import Group

    from leaseboard.policy.services.people import ROLE_NAMES as ROLES

    # One read when they are all there (the usual case): make_user runs this for every user.
    have = set(Group.objects.filter(name__in=ROLES).values_list("name", flat=True))
    if len(have) < len(ROLES):
        Group.objects.bulk_create(
            [Group(name=name) for name in ROLES if name not in have], ignore_conflicts=True
        )


def make_user(username: str, *roles: str):  # type: ignore[no-untyped-def]
    """A user with password PASSWORD in the given role groups (none: no role at all)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    ensure_role_groups()
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    if roles:
        user.groups.add(*Group.objects.filter(name__in=roles))
    return user


def grant_break_glass(user: Any) -> None:
    from django.contrib.auth.models import Permission

    user.user_permissions.add(
        Permission.objects.get(codename="break_glass", content_type__app_label="takeovers")
    )


# -- commit-time rules -----------------------------------------------------------------


def effect_rules(queue: Any, *rules: tuple[str, str] | Any, default: str | None = None) -> None:
    """Replace a queue's commit-time rules: each a (kind glob, decision) pair or a RuleSpec,
    in order; `default` the decision when none matches. Validated like a saved rule set."""
    from django.db.models import F

    from leaseboard.core.models import EffectRule, Queue
    from leaseboard.domain.policy import RuleSpec, rule_set_compiled

    queue = queue if isinstance(queue, Queue) else Queue.objects.get(name=queue)
    specs = [
        r if isinstance(r, RuleSpec) else RuleSpec(name=f"r{i}", kind=r[0], decision=r[1])
        for i, r in enumerate(rules, 1)
    ]
    default = default or queue.default_decision
    rule_set_compiled(specs, default)
    EffectRule.objects.filter(queue=queue).delete()
    EffectRule.objects.bulk_create(
        EffectRule(
            queue=queue,
            position=i,
            name=s.name,
            kind=s.kind,
            target=s.target,
            condition=s.when,
            decision=s.decision,
            note=s.note,
            decide_within_ms=s.decide_within_ms,
            on_timeout=s.on_timeout,
        )
        for i, s in enumerate(specs, 1)
    )
    Queue.objects.filter(id=queue.id).update(
        default_decision=default, policy_version=F("policy_version") + 1
    )
    # Each test's rollback brings the version back, so a version number repeats across
    # tests: forget the rule sets this process compiled (keyed by queue and version).
    from leaseboard.core.services.rule_sets import policy_caches_forget

    policy_caches_forget()


# -- work items and leases -------------------------------------------------------------


def admit(key: str, *, queue: str = "default", **timing: int) -> WorkItem:
    """Admit a work item; `timing` overrides the queue's lease timing (ttl_ms=..., ...)."""
    from leaseboard.core.services.work import work_admit

    item, _ = work_admit(key=key, queue_name=queue, timing=timing or None, by=None)
    return item


def leased_item(
    executor: Executor, key: str | None = None, queue: str = "default", **timing: int
) -> Lease:
    """Admit a work item and grant `executor` a lease on it; returns the Lease."""
    from leaseboard.core.services.leases import lease_acquire

    key = key or f"job-{next(_seq)}"
    admit(key, queue=queue, **timing)
    if executor.kind == "human":
        return human_standing(executor, key)
    return lease_acquire(work_key=key, executor=executor).lease


def human_standing(executor: Executor, key: str, standing_ms: int = 15_000) -> Lease:
    """Grant a human executor standing on an admitted, unleased work item, as an approved
    takeover would (humans never acquire)."""
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.locking import work_item_locked_by
    from leaseboard.core.services.leases import lease_grant_locked

    with transaction.atomic():
        item = work_item_locked_by(key=key)
        return lease_grant_locked(
            item=item,
            holder=executor,
            now_ms=db_now_ms(),
            grant_kind="takeover",
            ttl_ms=standing_ms,
            jeopardy_after_ms=standing_ms,
        )


def bulk_leases(
    n: int,
    *,
    prefix: str,
    holder: Executor,
    jeopardy_in_ms: int,
    expires_in_ms: int,
    ttl_ms: int = 15_000,
) -> None:
    """Insert n admitted work items, each with an active lease (epoch 1), in two statements.
    Times are relative to the database clock; negative means already past."""
    from leaseboard.core.clock import now_ms_sql
    from leaseboard.core.models import Queue

    queue, _ = Queue.objects.get_or_create(name="default")
    now = now_ms_sql()
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO core_workitem (key, queue_id, title, scope, timing, admission, status, "
            f"epoch, created_at_ms, admitted_at_ms) "
            f"SELECT %s || g, %s, '', '{{}}', '{{}}', 'admitted', 'open', 1, c.n, c.n "
            f"FROM generate_series(1, %s) g, (SELECT {now} AS n) c",
            [prefix, queue.id, n],
        )
        cur.execute(
            f"INSERT INTO core_lease (id, work_item_id, holder_id, epoch, state, grant_kind, "
            f"granted_at_ms, renewed_at_ms, jeopardy_at_ms, expires_at_ms, max_expires_at_ms, "
            f"due_at_ms, ttl_ms, renew_after_ms, jeopardy_after_ms, lock_delay_ms, end_reason, "
            f"takeover_reason, renew_count, max_gap_ms, recent_renewals) "
            f"SELECT gen_random_uuid(), w.id, %s, 1, 'active', 'acquire', c.n - 1000, "
            f"c.n - 1000, c.n + %s, c.n + %s, c.n + 86400000, c.n + %s, %s, %s, %s, 0, '', '', "
            f"1, 0, '' FROM core_workitem w, (SELECT {now} AS n) c WHERE w.key LIKE %s",
            [
                holder.id,
                jeopardy_in_ms,
                expires_in_ms,
                jeopardy_in_ms,
                ttl_ms,
                ttl_ms // 3,
                (ttl_ms * 2) // 3,
                prefix.replace("%", r"\%") + "%",
            ],
        )


# -- moving time for some rows only ----------------------------------------------------


def jeopardy_stored(lease: Lease) -> None:
    """The sweep's jeopardy, stored: the lease's state and its open alert."""
    from leaseboard.core.models import Alert, Lease

    Lease.objects.filter(id=lease.id).update(state="jeopardy")
    Alert.objects.create(
        kind="jeopardy",
        dedupe_key=f"jeopardy:{lease.id}:{lease.epoch}",
        lease=lease,
        work_item=lease.work_item,
        epoch=lease.epoch,
        message="m",
        opened_at_ms=0,
    )


def age_lease(lease_id: Any, ms: int) -> None:
    """Move one lease `ms` into its own past: every stored time earlier by `ms`."""
    sets = ", ".join(f"{col} = {col} - %s" for col in LEASE_TIME_COLUMNS)
    with connection.cursor() as cur:
        cur.execute(
            f"UPDATE core_lease SET {sets} WHERE id = %s",
            [ms] * len(LEASE_TIME_COLUMNS) + [str(lease_id)],
        )


def age_leases(ms: int, *, lease_ids: list | None = None) -> None:
    """Move live leases' stored times `ms` into the past: time passes for them only."""
    sets = ", ".join(f"{col} = {col} - %s" for col in LEASE_TIME_COLUMNS)
    params: list = [ms] * len(LEASE_TIME_COLUMNS)
    where = "state IN ('active', 'jeopardy')"
    if lease_ids is not None:
        where += " AND id = ANY(%s::uuid[])"
        params.append([str(x) for x in lease_ids])
    with connection.cursor() as cur:
        cur.execute(f"UPDATE core_lease SET {sets} WHERE {where}", params)


def age_fence(item_key: str, ms: int) -> None:
    """Move the fence of a work item `ms` into the past: the expiries of its effects'
    tokens and any `fenced_until` its leases recorded (docs/design.md §5)."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE core_effect SET token_expires_at_ms = token_expires_at_ms - %s "
            "WHERE token_expires_at_ms IS NOT NULL AND work_item_id = "
            "(SELECT id FROM core_workitem WHERE key = %s)",
            [ms, item_key],
        )
        cur.execute(
            "UPDATE core_lease SET fenced_until_ms = fenced_until_ms - %s "
            "WHERE fenced_until_ms > 0 AND work_item_id = "
            "(SELECT id FROM core_workitem WHERE key = %s)",
            [ms, item_key],
        )


def age_sweep_clock(ms: int) -> None:
    """Pretend the last sweep ran `ms` earlier (sweeps were away)."""
    with connection.cursor() as cur:
        cur.execute("UPDATE sweeps_sweepstate SET last_sweep_at_ms = last_sweep_at_ms - %s", [ms])


# -- effects and takeovers -------------------------------------------------------------


def effect_under(
    lease: Lease,
    executor: Executor,
    key: str,
    *,
    kind: str = "payment.refund",
    target: str = "order-7",
    payload: Any = None,
) -> Effect:
    """`executor` proposes an effect under `lease` at the lease's epoch as it is now, with
    idempotency key `key`: the agent's usual call. A refund of order-7 with payload {}
    unless told otherwise."""
    from leaseboard.core.services.effects import effect_propose

    return effect_propose(
        lease_id=lease.id,
        executor=executor,
        epoch=lease.epoch,
        kind=kind,
        target=target,
        idempotency_key=key,
        payload=payload,
    )


def stale_effect_on(item_key: str, old_holder, new_holder):  # type: ignore[no-untyped-def]
    """Expire the old holder's lease by time, grant the item to `new_holder` (epoch + 1),
    then let the old holder try an effect under its old epoch: refused as stale."""
    from leaseboard.core.models import Lease
    from leaseboard.core.services.effects import effect_propose
    from leaseboard.core.services.leases import lease_acquire
    from leaseboard.domain.errors import StaleEpoch

    old = Lease.objects.get(work_item__key=item_key, state__in=["active", "jeopardy"])
    age_lease(old.id, old.ttl_ms + 1000)
    new = lease_acquire(work_key=item_key, executor=new_holder).lease
    with pytest.raises(StaleEpoch):
        effect_propose(
            lease_id=old.id,
            executor=old_holder,
            epoch=old.epoch,
            kind="payment.refund",
            target="order-42",
            idempotency_key=f"stale-{next(_seq)}",
        )
    return old, new


def request_for(key: str, user: Any, **kw: Any):  # type: ignore[no-untyped-def]
    """A takeover request on work item `key` by `user` as operator; `kw` overrides."""
    from leaseboard.core.authority import Actor
    from leaseboard.takeovers.services import takeover_request

    args = {
        "work_key": key,
        "actor": Actor.human(user),
        "reason_category": "stuck",
        "reason_text": "agent loops on the refund step",
        "request_id": "req-t",
    }
    args.update(kw)
    return takeover_request(**args)


def standing_on(key: str, people: Any):  # type: ignore[no-untyped-def]
    """`people.operator`'s standing on work item `key`: a takeover request (request_for)
    approved by `people.approver` with the note "ok"; returns the intervention."""
    from leaseboard.core.authority import Actor
    from leaseboard.takeovers.services import takeover_approve

    return takeover_approve(
        request_pk=request_for(key, people.operator).id,
        actor=Actor.human(people.approver),
        note="ok",
    )


def signed_in(user: Any):  # type: ignore[no-untyped-def]
    """A Django test client with `user` signed in (no password round trip)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


# The payments rule of the queue-scope tests: refunds above 50,000.00 need an approver.
BIG_REFUNDS = RuleSpec(
    name="big-refunds",
    kind="payment.refund",
    when="payload.amount_cents > 5000000",
    decision="require_approval",
)


# -- an agent holding a lease through the HTTP API (the payments sandbox tests) ----------


@dataclass
class Holder:
    api: Any
    token: str
    key: str
    lease_id: str = ""
    epoch: int = 0
    fencing_token: str = ""

    def acquire(self) -> Holder:
        r = self.api.post(f"/api/v1/work-items/{self.key}/lease", {}, self.token)
        assert r.status_code == 201, r.content
        body = r.json_body
        return Holder(
            self.api, self.token, self.key, body["lease_id"], body["epoch"], body["fencing_token"]
        )

    def effect(self, idempotency_key: str) -> dict:
        r = self.api.post(
            "/api/v1/effects",
            {
                "lease_id": self.lease_id,
                "epoch": self.epoch,
                "kind": "payment.charge",
                "target": "sandbox:acme",
                "idempotency_key": idempotency_key,
            },
            self.token,
        )
        assert r.status_code == 201 and r.json_body["decision"] == "authorized", r.content
        return r.json_body

    def report(self, effect_id: str, outcome: str = "applied") -> None:
        r = self.api.post(f"/api/v1/effects/{effect_id}/outcome", {"outcome": outcome}, self.token)
        assert r.status_code == 200, r.content

    def release(self) -> None:
        r = self.api.post(
            f"/api/v1/leases/{self.lease_id}/release", {"epoch": self.epoch}, self.token
        )
        assert r.status_code == 200, r.content


def age_approval(effect_id: Any, ms: int) -> None:
    """Move a waiting effect's decide-by time `ms` into the past (its lease untouched)."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE core_effect SET decide_by_ms = decide_by_ms - %s WHERE id = %s",
            [ms, str(effect_id)],
        )


def open_alerts(executor: Executor, n: int, *, prefix: str = "fl") -> list[Any]:
    """`n` open jeopardy alerts, each on its own work item `<prefix>-<i>` leased by
    `executor`: what the bulk acknowledge acts on."""
    from leaseboard.core.models import Alert

    alerts = []
    for i in range(n):
        lease = leased_item(executor, key=f"{prefix}-{i}")
        alerts.append(
            Alert.objects.create(
                kind="jeopardy",
                dedupe_key=f"j:{prefix}-{i}",
                message=f"{prefix}-{i} missed renewals",
                opened_at_ms=1,
                work_item=lease.work_item,
                lease=lease,
            )
        )
    return alerts


def pending_refunds(
    executor: Executor,
    n: int,
    *,
    rule: str = "refunds",
    amount_cents: int | None = None,
    **timing: int,
) -> list[Any]:
    """`n` refunds waiting for an approver, each under its own lease on `rf-<i>` (the
    default queue's rule `rule` requires approval of `payment.*`); amounts 100 + i cents
    unless `amount_cents` is given."""
    from leaseboard.core.services.effects import effect_propose
    from leaseboard.domain.policy import RuleSpec

    effects = []
    for i in range(n):
        lease = leased_item(executor, key=f"rf-{i}", **timing)
        if i == 0:
            effect_rules(
                lease.work_item.queue,
                RuleSpec(name=rule, kind="payment.*", decision="require_approval"),
            )
        effects.append(
            effect_propose(
                lease_id=lease.id,
                executor=executor,
                epoch=lease.epoch,
                kind="payment.refund",
                target=f"order-{i}",
                idempotency_key=f"k-{i}",
                payload={"amount_cents": 100 + i if amount_cents is None else amount_cents},
            )
        )
    return effects
