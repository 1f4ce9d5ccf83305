"""Executors: agents (bearer token, stored hashed) and humans (a Django user)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q


def hash_token(token: str) -> str:
    # Tokens are 256-bit random values, so a fast hash is enough; no salt is needed.
    return hashlib.sha256(token.encode()).hexdigest()


class Executor(models.Model):
    class Kind(models.TextChoices):
        AGENT = "agent"
        HUMAN = "human"

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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["agent", "human"]), name="executor_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(kind="agent") | Q(user__isnull=False),
                name="executor_human_has_user",
            ),
        ]

    def __str__(self) -> str:
        return self.name
