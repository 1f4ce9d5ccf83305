"""Who is acting (leaseboard/core/actors.py): a person's roles and their queue scopes read
from the database in one query, an agent's queue scope from its credential, and the
questions the authority asks an Actor (holder of a lease, may use a queue)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core import authority
from leaseboard.core.actors import (
    RECIPIENT_KIND,
    Actor,
    agent_queues_of,
    user_role_scopes,
    user_roles,
)
from leaseboard.core.models import Queue, RoleScope
from leaseboard.core.services.executors import human_executor_for_user_id
from leaseboard.domain.authority import Role
from leaseboard.domain.errors import Forbidden
from tests.builders import grant_break_glass, leased_item, make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_authority_module_still_offers_the_actor_to_its_callers() -> None:
    assert authority.Actor is Actor
    assert authority.user_roles is user_roles
    assert authority.agent_queues_of is agent_queues_of


def test_a_signed_out_or_inactive_user_holds_no_role() -> None:
    assert user_role_scopes(AnonymousUser()) == (frozenset(), {})
    olga = make_user("olga-inactive", "operator")
    olga.is_active = False
    olga.save()
    assert user_role_scopes(olga) == (frozenset(), {})


def test_a_superuser_holds_every_role_for_every_queue() -> None:
    root = make_user("root-actor")
    root.is_superuser = True
    root.save()
    assert user_role_scopes(root) == (frozenset(Role), {})


def test_roles_and_their_queue_scopes_are_read_in_one_query() -> None:
    pam = make_user("pam-actor", "operator", "approver")
    RoleScope.objects.create(user=pam, role="approver", queues=["payments", "refunds"])
    with CaptureQueriesContext(connection) as queries:
        roles, scopes = user_role_scopes(pam)
    assert len(queries) == 1
    assert roles == {Role.OPERATOR, Role.APPROVER}
    assert scopes == {Role.APPROVER: frozenset({"payments", "refunds"})}
    assert user_roles(pam) == roles


def test_a_person_is_read_from_the_database_with_the_executor_they_act_as() -> None:
    ada = make_user("ada-actor", "operator")
    RoleScope.objects.create(user=ada, role="operator", queues=["payments"])
    grant_break_glass(ada)
    executor = human_executor_for_user_id(ada.pk)
    actor = Actor.human(ada)
    assert actor.kind == "human" and actor.name == "ada-actor"
    assert actor.executor_id == executor.id and actor.human_user_id == ada.pk
    assert actor.break_glass and actor.scoped and not actor.is_agent
    assert actor.roles_in("payments") == {Role.OPERATOR}
    assert actor.roles_in("refunds") == frozenset()  # held for payments only
    assert actor.roles_in(None) == frozenset()
    assert Actor.of_executor(executor) == actor


def test_a_page_gate_reads_roles_without_the_executor() -> None:
    bob = make_user("bob-actor", "manager")
    human_executor_for_user_id(bob.pk)
    gate = Actor.gate(bob)
    assert gate.roles == {Role.MANAGER} and gate.executor_id is None
    assert not gate.break_glass and not gate.scoped
    assert gate.roles_in("anything") == {Role.MANAGER}  # unscoped: held for every queue


def test_an_agent_uses_only_the_queues_its_credential_names(agent) -> None:  # type: ignore[no-untyped-def]
    Queue.objects.create(name="payments")
    scoped, _ = agent(queues=["payments"])
    anywhere, _ = agent()
    actor = Actor.agent(scoped)
    assert actor.is_agent and actor.queues == {"payments"}
    assert actor.may_use("payments") and not actor.may_use("refunds")
    assert agent_queues_of(scoped) == {"payments"}
    assert agent_queues_of(anywhere) is None and Actor.agent(anywhere).may_use("refunds")
    assert Actor.of_executor(scoped) == actor


def test_only_the_leases_own_executor_is_its_holder(agent) -> None:  # type: ignore[no-untyped-def]
    holder, _ = agent()
    other, _ = agent()
    lease = leased_item(holder, key="actor-holder")
    assert Actor.agent(holder).is_holder_of(lease)
    assert not Actor.agent(other).is_holder_of(lease)
    assert not Actor.agent(holder).is_holder_of(None)


def test_an_actor_without_a_person_is_never_named_as_an_author(recipient) -> None:  # type: ignore[no-untyped-def]
    row, _ = recipient()
    actor = Actor.recipient(row)
    assert actor.is_recipient and actor.kind == RECIPIENT_KIND
    with pytest.raises(Forbidden):
        actor.human_user_id  # noqa: B018 - the property raises
