"""Executors: agents (bearer token, stored hashed) and humans (a Django user)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.domain.vocabulary import ExecutorKind


def hash_token(token: str) -> str:
    # Tokens are 256-bit random values, so a fast hash is enough; no salt is needed.
    return hashlib.sha256(token.encode()).hexdigest()


# Human executors are named "human:<username>"; no agent may take a name there.
HUMAN_PREFIX = "human:"


class Executor(models.Model):
    Kind = text_choices(ExecutorKind, module=__name__, qualname="Executor.Kind")

    name = models.CharField(max_length=150, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="executor",
    )
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    is_active = models.BooleanField(default=True)
    # An agent's queue scope: the queues it may admit work to, acquire in and propose
    # effects in (names; queues are never renamed or deleted). Every queue only when
    # `all_queues` says so explicitly; a new agent with neither may use none.
    queues = models.JSONField(default=list, blank=True)
    all_queues = models.BooleanField(default=False, db_default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=values(ExecutorKind)), name="executor_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(kind=ExecutorKind.AGENT.value) | Q(user__isnull=False),
                name="executor_human_has_user",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def display_name(self) -> str:
        """The name people know: a person's username, an agent's name."""
        return (
            self.name.removeprefix(HUMAN_PREFIX) if self.kind == ExecutorKind.HUMAN else self.name
        )
