"""Effect kinds' display hints (leaseboard.domain.amounts): how pages show an amount in a
payload. Set by config as code (`[effect_kinds."GLOB"]`, the whole set replaced when the
file has the table, left as it is when not), audited before -> after; read once per page
(leaseboard.core.display_hints) and applied by the `effect_amount` template tag."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from leaseboard.core.authority import Actor, authorize
from leaseboard.core.display_hints import display_hints_loaded
from leaseboard.core.models import EffectKindDisplay
from leaseboard.domain.amounts import DisplayHint, hint_from, hint_problems
from leaseboard.domain.authority import Act
from leaseboard.policy.services.common import SettingsInvalid, audited

MAX_HINTS = 200


def display_hints_snapshot() -> dict[str, dict[str, Any]]:
    """{kind glob: hint table}, as config export writes it."""
    return {h.kind: h.as_dict() for h in display_hints_loaded()}


def display_hints_checked(raw: Any) -> list[DisplayHint]:
    """Hints from `{glob: {amount_field, currency, minor_units, currency_field}}`; raises
    SettingsInvalid with each problem under its glob and field."""
    if not isinstance(raw, dict):
        raise SettingsInvalid({"": 'a table of kind glob -> hint ([effect_kinds."payment.*"])'})
    if len(raw) > MAX_HINTS:
        raise SettingsInvalid({"": f"at most {MAX_HINTS} effect kinds"})
    errors: dict[str, str] = {}
    for kind, table in raw.items():
        for field, message in hint_problems(str(kind), table).items():
            errors[f'"{kind}".{field}' if field else f'"{kind}"'] = message
    if errors:
        raise SettingsInvalid(errors)
    return [hint_from(str(kind), table) for kind, table in sorted(raw.items())]


def display_hints_replace_locked(hints: list[DisplayHint], *, actor: Actor) -> bool:
    """Replace the whole set in the caller's transaction; False when it was already so."""
    authorize(Act.CONFIGURE_QUEUE, actor)
    before = display_hints_snapshot()
    after = {h.kind: h.as_dict() for h in sorted(hints, key=lambda h: h.kind)}
    if before == after:
        return False
    EffectKindDisplay.objects.all().delete()
    EffectKindDisplay.objects.bulk_create(
        EffectKindDisplay(
            kind=h.kind,
            amount_field=h.amount_field,
            currency=h.currency,
            minor_units=h.minor_units,
            currency_field=h.currency_field,
        )
        for h in hints
    )
    audited(
        Act.CONFIGURE_QUEUE,
        actor,
        action="display_hints.update",
        object_type="config",
        object_id="effect_kinds",
        before=before,
        after=after,
    )
    return True


# The same replacement as its own outermost transaction (the demo's set-up).
display_hints_replace = transaction.atomic(durable=True)(display_hints_replace_locked)
