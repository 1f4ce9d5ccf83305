"""Who is acting: an agent (by its bearer token), a signed-in person, or a recipient (by
its recipient credential), with the roles and queue scopes the authority table asks about.

`Actor` is built from the database (a person's roles and their queues, an agent's queue
scope), never from what the caller says; `leaseboard.core.authority` decides what it may
do. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import OuterRef, Subquery

from leaseboard.core.models import Executor, Lease, Recipient, RoleScope
from leaseboard.domain.authority import Role, roles_for_queue
from leaseboard.domain.errors import Forbidden

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.contrib.auth.models import User as AuthUser

    # What `request.user` is: a user of the project's user model (Django's own), signed in
    # or not, or the anonymous user.
    User = AuthUser | AnonymousUser

BREAK_GLASS_PERMISSION = "takeovers.break_glass"
RECIPIENT_KIND = "recipient"  # an Actor's kind when a recipient credential speaks


def user_role_scopes(user: User) -> tuple[frozenset[Role], dict[Role, frozenset[str]]]:
    """A signed-in, active user's roles (auth groups of the roles' names; a superuser has
    every role, for every queue) and, for the roles held for named queues only, those
    queues (RoleScope). One query."""
    if not user.is_authenticated or not user.is_active:
        return frozenset(), {}
    if getattr(user, "is_superuser", False):
        return frozenset(Role), {}
    scope = RoleScope.objects.filter(user_id=user.pk, role=OuterRef("name")).values("queues")
    rows = (
        user.groups.filter(name__in=list(Role))
        .annotate(scope=Subquery(scope[:1]))
        .values_list("name", "scope")
    )
    roles: set[Role] = set()
    scopes: dict[Role, frozenset[str]] = {}
    for name, queues in rows:
        roles.add(Role(name))
        if queues is not None:
            scopes[Role(name)] = frozenset(queues)
    return frozenset(roles), scopes


def user_roles(user: User) -> frozenset[Role]:
    """The roles a user holds, for every queue or for some."""
    return user_role_scopes(user)[0]


@dataclass(frozen=True)
class Actor:
    """Who is acting: an agent (by its bearer token), a signed-in human, or a recipient
    (by its recipient credential)."""

    kind: str  # Executor.Kind, or RECIPIENT_KIND
    name: str
    executor_id: int | None = None
    user_id: int | None = None
    roles: frozenset[Role] = frozenset()  # held for every queue or for some
    break_glass: bool = False
    # The queues this credential may use (an agent's queue scope); None: every queue. The
    # acts the table marks `scoped` are refused queue_not_allowed anywhere else.
    queues: frozenset[str] | None = None
    # A person's roles held for named queues only: role -> those queues. A role in `roles`
    # and not here is held for every queue. Never compared (a dict is not hashable).
    role_queues: dict[Role, frozenset[str]] = field(default_factory=dict, compare=False)

    @classmethod
    def agent(cls, executor: Executor) -> Actor:
        return cls(
            kind=Executor.Kind.AGENT,
            name=executor.name,
            executor_id=executor.id,
            queues=None if executor.all_queues else frozenset(executor.queues or ()),
        )

    @classmethod
    def recipient(cls, recipient: Recipient) -> Actor:
        return cls(kind=RECIPIENT_KIND, name=recipient.name)

    @classmethod
    def of_executor(cls, executor: Executor) -> Actor:
        """The actor behind an executor row: an agent, or the human its user is."""
        if executor.kind == Executor.Kind.AGENT or executor.user is None:
            return cls.agent(executor)
        return cls.human(executor.user)

    @classmethod
    def human(cls, user: User) -> Actor:
        """Roles and the executor a human acts as are read from the database, never taken
        from the caller."""
        executor_id = (
            Executor.objects.filter(user_id=user.pk).values_list("id", flat=True).first()
            if user.is_authenticated
            else None
        )
        roles, scopes = user_role_scopes(user)
        return cls(
            kind=Executor.Kind.HUMAN,
            name=user.get_username(),
            executor_id=executor_id,
            user_id=user.pk,
            roles=roles,
            role_queues=scopes,
            break_glass=bool(user.is_active and user.has_perm(BREAK_GLASS_PERMISSION)),
        )

    @classmethod
    def gate(cls, user: User, *, break_glass: bool = False) -> Actor:
        """A person as a page sees them, to ask what they may do (the `can` helper and
        `act_required`): roles and scopes in one query; the services decide each act again
        with `Actor.human`."""
        roles, scopes = user_role_scopes(user)
        return cls(
            kind=Executor.Kind.HUMAN,
            name=user.get_username() if user.is_authenticated else "",
            user_id=user.pk,
            roles=roles,
            role_queues=scopes,
            break_glass=break_glass,
        )

    def roles_in(self, queue: str | None) -> frozenset[Role]:
        """The roles that count for an act on work in `queue` (None: only those held for
        every queue)."""
        if not self.role_queues:
            return self.roles
        return roles_for_queue(self.roles, self.role_queues, queue)

    @property
    def scoped(self) -> bool:
        return bool(self.role_queues)

    @property
    def human_user_id(self) -> int:
        """The signed-in user a record names as its author (who requested, approved,
        snoozed…). The acts that write such records allow only humans, so `authorize` has
        already refused anyone else; an actor without a user is refused here too."""
        if self.user_id is None:
            raise Forbidden(f"{self.name!r} is not a signed-in person")
        return self.user_id

    @property
    def is_agent(self) -> bool:
        return self.kind == Executor.Kind.AGENT

    @property
    def is_recipient(self) -> bool:
        return self.kind == RECIPIENT_KIND

    def may_use(self, queue: str) -> bool:
        return self.queues is None or queue in self.queues

    def is_holder_of(self, lease: Lease | None) -> bool:
        return (
            lease is not None
            and self.executor_id is not None
            and (lease.holder_id == self.executor_id)
        )


def agent_queues_of(executor: Executor) -> frozenset[str] | None:
    """The queues an agent may use (None: every queue), for an act about the agent."""
    return None if executor.all_queues else frozenset(executor.queues or ())
