"""Django's view of the domain enums: model choices and check-constraint value lists.

The domain enum (leaseboard.domain) is the one definition; `text_choices` derives the
`TextChoices` class the models expose (`Lease.State`, `Effect.Outcome`, …) with the same
member names and values, so `Lease.State.ACTIVE == Certainty.ACTIVE` and Django's
`.choices`, `.values` and labels keep working. Labels are Django's default (the member
name, title-cased), as they were when the choices were written out by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Generic, TypeVar, cast

from django.db import models

E = TypeVar("E", bound=StrEnum)


class ChoicesOf(Generic[E]):
    """What a type checker knows of a derived TextChoices class: Django's `choices`,
    `values` and `labels`, and every member, typed as the domain enum's member it equals.
    (A class made at run time has no members a checker can see; this is its description,
    never instantiated.)"""

    choices: list[tuple[str, str]]
    values: list[str]
    labels: list[str]

    def __getattr__(self, name: str) -> E:
        raise AttributeError(name)


def text_choices(
    enum: type[E],
    *,
    module: str,
    qualname: str,
    labels: Mapping[Any, str] | None = None,
) -> ChoicesOf[E]:
    """A TextChoices class with exactly the members of `enum`, named where it is bound
    (`module`, `qualname`) so its members pickle and print like a hand-written one;
    `labels` (member -> label) replaces Django's default labels."""
    members = [
        (member.name, (member.value, labels[member]) if labels else member.value) for member in enum
    ]
    derived: Any = models.TextChoices(  # type: ignore[call-overload]
        qualname.rsplit(".", 1)[-1], members, module=module, qualname=qualname
    )
    return cast(ChoicesOf[E], derived)


def values(enum: type[StrEnum], *, blank: bool = False) -> list[str]:
    """The stored values of `enum` in definition order, for `Q(field__in=…)` constraints;
    `blank` adds "" for a field whose empty string means "not yet"."""
    return ([""] if blank else []) + [member.value for member in enum]
