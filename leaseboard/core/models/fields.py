"""What the models repeat, written once: a reference that most rows leave NULL, and the
partial index such a column gets instead of Django's plain one.

Each returns exactly the field or index the models spelt out before it, so the schema and
the migrations do not change (`makemigrations --check` guards that).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q


def sparse_ref(to: Any, *, related_name: str = "+") -> Any:
    """A nullable PROTECT reference that most rows leave NULL, with no single-column index
    of its own (every row written would update it): its model's Meta gives it a
    `not_null_index`, or a composite index that leads with it."""
    return models.ForeignKey(
        to,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name=related_name,
        db_index=False,
    )


def not_null_index(field: str, name: str, *, include: list[str] | None = None) -> models.Index:
    """A partial index over the rows where `field` (a sparse reference, an end time; "-"
    first for descending order) is set: the rows that leave it NULL, the most and the
    hottest, write no entry."""
    column = field.removeprefix("-")
    return models.Index(
        fields=[field], include=include, condition=Q(**{f"{column}__isnull": False}), name=name
    )
