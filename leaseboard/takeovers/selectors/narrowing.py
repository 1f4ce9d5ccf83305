"""Narrowing a query by the filters a person filled in: a filter left empty narrows
nothing."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


def narrowed(qs: QuerySet[M], **lookups: Any) -> QuerySet[M]:
    """`qs` filtered by each lookup whose value is given (one `.filter` each, in order)."""
    for lookup, value in lookups.items():
        if value:
            qs = qs.filter(**{lookup: value})
    return qs
