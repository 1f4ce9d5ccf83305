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
from typing import Any

from django.db import models


def text_choices(
    enum: type[StrEnum],
    *,
    module: str,
    qualname: str,
    labels: Mapping[Any, str] | None = None,
) -> type[models.TextChoices]:
    """A TextChoices class with exactly the members of `enum`, named where it is bound
    (`module`, `qualname`) so its members pickle and print like a hand-written one;
    `labels` (member -> label) replaces Django's default labels."""
    members = [
        (member.name, (member.value, labels[member]) if labels else member.value) for member in enum
    ]
    return models.TextChoices(  # type: ignore[return-value]
        qualname.rsplit(".", 1)[-1], members, module=module, qualname=qualname
    )


def values(enum: type[StrEnum], *, blank: bool = False) -> list[str]:
    """The stored values of `enum` in definition order, for `Q(field__in=…)` constraints;
    `blank` adds "" for a field whose empty string means "not yet"."""
    return ([""] if blank else []) + [member.value for member in enum]
