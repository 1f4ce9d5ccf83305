"""Create executors: agents get a bearer token shown once; humans map to a Django user."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from leaseboard.core.models import Executor, Queue, Recipient
from leaseboard.core.models.executors import HUMAN_PREFIX, hash_token
from leaseboard.core.services.audit import audit_admin
from leaseboard.domain.errors import NotFound, ValidationFailed

TOKEN_PREFIX = "lb_"


def queue_scope_checked(queues: list[str] | tuple[str, ...] | None, all_queues: bool) -> list[str]:
    """The queues an agent may use, as stored: existing queue names, sorted; none when it may
    use every queue, which must be said (`all_queues`), never implied by an empty list."""
    names = sorted({q.strip() for q in queues or () if q and q.strip()})
    if all_queues:
        if names:
            raise ValidationFailed(
                "name the agent's queues or give it every queue, not both", param="queues"
            )
        return []
    if not names:
        raise ValidationFailed(
            "name the queues this agent may admit work to and work in (every queue only when "
            "said explicitly)",
            param="queues",
        )
    known = set(Queue.objects.filter(name__in=names).values_list("name", flat=True))
    missing = [n for n in names if n not in known]
    if missing:
        raise ValidationFailed(f"no queue {missing[0]!r}", param="queues")
    return names


def queue_scope_view(executor: Executor) -> dict[str, Any]:
    """An agent's queue scope as the audit log and the settings pages say it."""
    return {"all_queues": True} if executor.all_queues else {"queues": list(executor.queues)}


# deliberate: a keyword-only signature, alike in shape with other services' only.
@transaction.atomic(durable=True)
def agent_create(
    *,
    name: str,
    queues: list[str] | tuple[str, ...] | None = None,
    all_queues: bool = False,
    actor_name: str,
) -> tuple[Executor, str]:
    """Create an agent and return (executor, token). Only the token's hash is stored. The
    agent may use the named queues, or every queue when `all_queues` says so."""
    name = name.strip()
    if not name or len(name) > 150:
        raise ValidationFailed("an agent name is 1 to 150 characters", param="name")
    if not name.isprintable() or "/" in name:
        # Names travel in URLs, logs, e-mails and chat messages: no line breaks, no NUL,
        # no "/" (a name with one broke the credentials page, issue 33).
        raise ValidationFailed("an agent name has no control characters and no '/'", param="name")
    if name.lower().startswith(HUMAN_PREFIX):
        raise ValidationFailed(
            f"agent names may not start with {HUMAN_PREFIX!r}: that namespace is reserved "
            "for the people who take work over",
            param="name",
        )
    scope = queue_scope_checked(queues, all_queues)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            executor = Executor.objects.create(
                name=name,
                kind=Executor.Kind.AGENT,
                token_hash=hash_token(token),
                queues=scope,
                all_queues=all_queues,
            )
    except IntegrityError:
        raise ValidationFailed(f"an executor named {name!r} already exists") from None
    audit_admin(
        "agent.create",
        "executor",
        executor.id,
        actor_name=actor_name,
        after={"name": name, "kind": Executor.Kind.AGENT.value, **queue_scope_view(executor)},
    )
    return executor, token


# deliberate: a keyword-only signature, alike in shape with other services' only.
@transaction.atomic(durable=True)
def agent_scope_change(
    *,
    name: str,
    queues: list[str] | tuple[str, ...] | None = None,
    all_queues: bool = False,
    actor_name: str,
) -> bool:
    """Set the queues an agent may use; False when they already were these (nothing
    recorded). Narrowing applies to its next admit, acquire and effect (within
    LEASEBOARD_TOKEN_CACHE_SECONDS in other processes); leases it holds may still be
    renewed, checkpointed, released and reported on."""
    executor = _agent_locked(name)
    scope = queue_scope_checked(queues, all_queues)
    before = queue_scope_view(executor)
    executor.queues, executor.all_queues = scope, all_queues
    after = queue_scope_view(executor)
    if after == before:
        return False
    executor.save(update_fields=["queues", "all_queues"])
    audit_admin(
        "agent.scope_change",
        "executor",
        executor.id,
        actor_name=actor_name,
        before={"name": executor.name, **before},
        after={"name": executor.name, **after},
    )
    transaction.on_commit(token_cache_forget)
    return True


def agent_rotate_token_locked(executor: Executor) -> str:
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    executor.token_hash = hash_token(token)
    executor.save(update_fields=["token_hash"])
    return token


def _agent_locked(name: str) -> Executor:
    executor = (
        Executor.objects.select_for_update(no_key=True)
        .filter(name=name.strip(), kind=Executor.Kind.AGENT)
        .first()
    )
    if executor is None:
        raise NotFound(f"no agent named {name!r}")
    return executor


def token_cleared(row: Executor | Recipient) -> bool:
    """Remove a locked row's credential (an agent's or a recipient's token); False when it
    had none."""
    if row.token_hash is None:
        return False
    row.token_hash = None
    row.save(update_fields=["token_hash"])
    return True


def _token_audited(
    action: str, executor: Executor, actor_name: str, *, had: bool, has: bool
) -> None:
    audit_admin(
        action,
        "executor",
        executor.id,
        actor_name=actor_name,
        before={"name": executor.name, "had_token": had},
        after={"name": executor.name, "had_token": has},
    )


@transaction.atomic(durable=True)
def agent_token_rotate(*, name: str, actor_name: str = "cli") -> tuple[Executor, str]:
    """Give an agent a new token (returned once); its old token stops working. A revoked
    agent gets a working token again this way."""
    executor = _agent_locked(name)
    had_token = executor.token_hash is not None
    token = agent_rotate_token_locked(executor)
    _token_audited("agent.token_rotate", executor, actor_name, had=had_token, has=True)
    # This process forgets tokens it has verified; others within their cache ttl.
    transaction.on_commit(token_cache_forget)
    return executor, token


@transaction.atomic(durable=True)
def agent_token_revoke(*, name: str, actor_name: str = "cli") -> bool:
    """Remove an agent's token: every request with it is refused (in other processes,
    within LEASEBOARD_TOKEN_CACHE_SECONDS). False when it had none (nothing recorded)."""
    executor = _agent_locked(name)
    if not token_cleared(executor):
        return False
    _token_audited("agent.token_revoke", executor, actor_name, had=True, has=False)
    transaction.on_commit(token_cache_forget)
    return True


def human_executor_for_user_id(user_id: int | None) -> Executor:
    """The executor a human acts as under standing; created on first need."""
    if user_id is None:
        raise ValidationFailed("only a signed-in person acts as a human executor")
    executor = Executor.objects.filter(user_id=user_id).first()
    if executor:
        return executor
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(pk=user_id)
    try:
        with transaction.atomic():
            return Executor.objects.create(
                name=f"{HUMAN_PREFIX}{user.get_username()}", kind=Executor.Kind.HUMAN, user=user
            )
    except IntegrityError:
        executor = Executor.objects.filter(user_id=user_id).first()
        if executor is None:  # an agent created before the namespace was reserved
            raise ValidationFailed(
                f"the executor name {HUMAN_PREFIX}{user.get_username()} is taken by an agent; "
                "rename that agent"
            ) from None
        return executor


_token_cache: dict[str, tuple[float, Executor]] = {}
_token_cache_lock = threading.Lock()
TOKEN_CACHE_MAX = 10_000


def executor_for_token(token: str) -> Executor | None:
    """The active executor a bearer token belongs to. Hits are cached in this process for
    LEASEBOARD_TOKEN_CACHE_SECONDS (default 2 s; 0 turns it off): the lookup is half the
    cost of a renew. A deactivated or rotated token therefore keeps working for at most
    that long in a process that has just seen it; misses are never cached."""
    if not token or len(token) > 200:
        return None
    digest = hash_token(token)
    ttl = settings.LEASEBOARD_TOKEN_CACHE_SECONDS
    if ttl > 0:
        hit = _token_cache.get(digest)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
    executor = Executor.objects.filter(token_hash=digest, is_active=True).first()
    if executor is not None and ttl > 0:
        with _token_cache_lock:
            if len(_token_cache) >= TOKEN_CACHE_MAX:
                _token_cache.clear()
            _token_cache[digest] = (time.monotonic() + ttl, executor)
    return executor


def token_cache_forget() -> None:
    with _token_cache_lock:
        _token_cache.clear()
