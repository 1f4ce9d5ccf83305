"""Amounts as people read them: an effect kind may declare which payload field holds an
amount in minor units, its currency and how many minor units a major unit has (config as
code's `[effect_kinds."refund.*"]`), so pages show "$1,250.00", not `amount_cents: 125000`.

A small formatter of our own rather than Babel: none is in requirements, the pages are in
English, and what is needed is grouping, the minor units and a symbol for the common
currencies (others show their ISO code). Integers only: no float ever rounds an amount.
Pure: no Django."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from leaseboard.domain.globs import glob_match, literal_length

SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹", "KRW": "₩"}
MAX_MINOR_UNITS = 4  # ISO 4217 has none above 4 (CLF, UYW)
CURRENCY = re.compile(r"[A-Z]{3}")
FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")


@dataclass(frozen=True)
class DisplayHint:
    kind: str  # a glob over effect kinds, e.g. "payment.*"
    amount_field: str  # the payload field holding the amount in minor units
    currency: str  # ISO 4217 code, e.g. "USD"
    minor_units: int = 2
    currency_field: str = ""  # a payload field naming the currency, if the payload has one

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "amount_field": self.amount_field,
            "currency": self.currency,
            "minor_units": self.minor_units,
        }
        if self.currency_field:
            out["currency_field"] = self.currency_field
        return out


@dataclass(frozen=True)
class Amount:
    field: str  # the payload field it was read from
    text: str  # "$1,250.00"


def money(minor: int, currency: str, minor_units: int) -> str:
    """`money(125000, "USD", 2)` -> "$1,250.00"; `money(-500, "CHF", 2)` -> "-CHF 5.00"."""
    sign = "-" if minor < 0 else ""
    major, rest = divmod(abs(minor), 10**minor_units)
    number = f"{major:,}" + (f".{rest:0{minor_units}d}" if minor_units else "")
    symbol = SYMBOLS.get(currency)
    return f"{sign}{symbol}{number}" if symbol else f"{sign}{currency} {number}"


def hint_for(kind: str, hints: Iterable[DisplayHint]) -> DisplayHint | None:
    """The hint of the most specific glob matching `kind` (the longest literal part)."""
    matching = [h for h in hints if glob_match(h.kind, kind)]
    return max(matching, key=lambda h: (literal_length(h.kind), h.kind), default=None)


def amount_shown(kind: str, payload: Any, hints: Iterable[DisplayHint]) -> Amount | None:
    """The effect's amount in words, or None when no hint covers its kind or the payload
    does not hold a whole number in the declared field."""
    hint = hint_for(kind, hints)
    if hint is None or not isinstance(payload, Mapping):
        return None
    value = payload.get(hint.amount_field)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    currency = hint.currency
    named = payload.get(hint.currency_field) if hint.currency_field else None
    if isinstance(named, str) and CURRENCY.fullmatch(named.upper()):
        currency = named.upper()
    return Amount(hint.amount_field, money(value, currency, hint.minor_units))


def hint_problems(kind: str, raw: Any) -> dict[str, str]:
    """Why `raw` is not a display hint for `kind` (each problem under its field), or {}."""
    if not isinstance(raw, Mapping):
        return {"": "a table of amount_field, currency, minor_units, currency_field"}
    known = ("amount_field", "currency", "minor_units", "currency_field")
    problems = {
        k: f"unknown field; a display hint has {', '.join(known)}"
        for k in sorted(set(raw) - set(known), key=str)
    }
    if not kind or len(kind) > 100 or any(ch.isspace() for ch in kind):
        problems[""] = "an effect kind or a glob of them (`payment.*`), at most 100 characters"
    for key in ("amount_field", "currency_field"):
        value = raw.get(key, "")
        if key == "amount_field" or value:
            if not isinstance(value, str) or not FIELD.fullmatch(value):
                problems[key] = "a payload field name (letters, digits, _ and -)"
    currency = raw.get("currency")
    if not isinstance(currency, str) or not CURRENCY.fullmatch(currency):
        problems["currency"] = "an ISO 4217 code in capitals, e.g. USD"
    units = raw.get("minor_units", 2)
    if not isinstance(units, int) or isinstance(units, bool) or not 0 <= units <= MAX_MINOR_UNITS:
        problems["minor_units"] = f"a whole number from 0 to {MAX_MINOR_UNITS} (USD: 2, JPY: 0)"
    return problems


def hint_from(kind: str, raw: Mapping[str, Any]) -> DisplayHint:
    """A hint from a checked table (hint_problems gave {})."""
    return DisplayHint(
        kind=kind,
        amount_field=raw["amount_field"],
        currency=raw["currency"],
        minor_units=raw.get("minor_units", 2),
        currency_field=raw.get("currency_field", ""),
    )
