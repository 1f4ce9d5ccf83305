"""The storm's fleet (bench/storm.py runs this with Django set up on the storm's own
database): a queue `payments` with a webhook, `--leases` work items, one lease each granted
through the product's grant (`lease_grant_locked`: core.sql.lease_grant's one statement,
epoch, lease and `granted` event), half of them held by as many distinct agents (the half
that dies; agents without a credential, made in bulk), the other half by `--renewers`
agents with credentials (the survivors, each renewing its share in SDK batches). An
operator with a session for the page sampler. Grants are made 1,000 per transaction under
the work items' row locks, as an acquire makes them, with a long ttl: nothing expires
during the setup; bench/storm.py sets the storm's timing when it starts.

Prints one JSON line: the renewers' tokens and their (lease id, epoch) lists, the dying
lease ids' count, the session cookie.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import import_module
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SETUP_TTL_MS = 3_600_000


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--leases", type=int, required=True)
    p.add_argument("--renewers", type=int, required=True)
    p.add_argument("--hook", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import django

    django.setup()
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Executor, Queue, WorkItem
    from leaseboard.core.services.executors import agent_create
    from leaseboard.core.services.leases.grants import lease_grant_locked

    started = time.monotonic()
    queue = Queue.objects.create(
        name="payments",
        timing={"ttl_ms": SETUP_TTL_MS, "max_lifetime_ms": 24 * 3_600_000},
        notify={"webhooks": [{"url": args.hook + "/alerts", "secret": "storm-alert-secret-1"}]},
    )
    dying_n = args.leases // 2
    survivors_n = args.leases - dying_n
    tokens = [
        agent_create(name=f"storm-survivor-{i}", queues=["payments"], actor_name="bench")[1]
        for i in range(args.renewers)
    ]
    survivor_agents = list(
        Executor.objects.filter(name__startswith="storm-survivor-").order_by("id")
    )
    Executor.objects.bulk_create(
        [
            Executor(name=f"storm-agent-{i}", kind=Executor.Kind.AGENT, queues=["payments"])
            for i in range(dying_n)
        ],
        batch_size=5000,
    )
    dying_agents = list(Executor.objects.filter(name__startswith="storm-agent-").order_by("id"))
    now = db_now_ms()
    WorkItem.objects.bulk_create(
        [
            WorkItem(key=f"pay-{n}", queue=queue, admission="admitted", created_at_ms=now,
                     admitted_at_ms=now)
            for n in range(args.leases)
        ],
        batch_size=5000,
    )  # fmt: skip
    items = list(WorkItem.objects.filter(queue=queue).order_by("id").values_list("id", flat=True))
    holders = dying_agents + [survivor_agents[i % args.renewers] for i in range(survivors_n)]
    held: dict[int, list[list[object]]] = {i: [] for i in range(args.renewers)}
    for start in range(0, len(items), 1000):
        with transaction.atomic(durable=True):
            chunk = list(
                WorkItem.objects.select_for_update()
                .select_related("queue")
                .filter(id__in=items[start : start + 1000])
                .order_by("id")
            )
            now = db_now_ms()
            for offset, item in enumerate(chunk):
                n = start + offset
                lease = lease_grant_locked(
                    item=item, holder=holders[n], now_ms=now, notify_recipients=False
                )
                if n >= dying_n:
                    held[(n - dying_n) % args.renewers].append([str(lease.id), lease.epoch])
        if start % 10_000 == 0:
            print(f"granted {start + len(chunk)} of {len(items)}", file=sys.stderr, flush=True)
    session = _operator_session()
    Path(args.out).write_text(
        json.dumps(
            {
                "tokens": tokens,
                "held": [held[i] for i in range(args.renewers)],
                "dying": dying_n,
                "session": session,
                "seed_s": round(time.monotonic() - started, 1),
            }
        )
    )


def _operator_session() -> dict[str, str]:
    """An operator signed in: a session in the configured engine, as the login view saves it."""
    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.auth.models import Group

    from leaseboard.policy.services.people import ROLE_NAMES

    for role in ROLE_NAMES:
        Group.objects.get_or_create(name=role)
    user = get_user_model().objects.create_user(username="storm-ops", password="storm-ops-pw-1")
    user.groups.add(Group.objects.get(name="operator"))
    store = import_module(settings.SESSION_ENGINE).SessionStore()
    store[SESSION_KEY] = str(user.pk)
    from django.utils.module_loading import import_string

    store[BACKEND_SESSION_KEY] = next(  # the first that loads a signed-in user
        path
        for path in settings.AUTHENTICATION_BACKENDS
        if hasattr(import_string(path), "get_user")
    )
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return {"name": settings.SESSION_COOKIE_NAME, "value": store.session_key or ""}


if __name__ == "__main__":
    main()
