"""Reading effect kinds' display hints (leaseboard.domain.amounts): every page that shows
an effect's amount reads them here, once (leaseboard.policy.services.display_hints writes
them, from config as code)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import JSONObject

from leaseboard.core.models import Effect, EffectKindDisplay
from leaseboard.domain.amounts import DisplayHint


def display_hints_loaded() -> list[DisplayHint]:
    """Every declared hint, in kind order (one small query)."""
    return [
        DisplayHint(r.kind, r.amount_field, r.currency, r.minor_units, r.currency_field)
        for r in EffectKindDisplay.objects.order_by("kind")
    ]


def amount_fields_annotated(
    effects: QuerySet[Effect], hints: list[DisplayHint]
) -> QuerySet[Effect]:
    """Effects with `display_payload`: only the payload fields the hints read (a page that
    defers the whole payload still shows amounts, without a query per row)."""
    names = sorted({h.amount_field for h in hints} | {h.currency_field for h in hints} - {""})
    if not names:
        return effects
    return effects.annotate(
        display_payload=JSONObject(**{n: KeyTransform(n, "payload") for n in names})
    )
