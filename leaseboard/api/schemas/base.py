"""The building blocks of every schema: the enumerations generated from the domain
(error codes, the refusing decision), the bounded scalar types (text PostgreSQL can
store, epochs, durations, keys, ids) and `Out`, the base of every response body.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from ninja import Schema
from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema

from leaseboard.core.services.work import KEY_PATTERN
from leaseboard.domain.errors import ALL_CODES, ERROR_CLASSES
from leaseboard.domain.text import json_storable, storable
from leaseboard.domain.timing import MAX_DURATION_MS

# -- enumerations generated from the domain -------------------------------------------------

ErrorCode = StrEnum("ErrorCode", {code.upper(): code for code in sorted(ALL_CODES)})  # type: ignore[misc]
ErrorCode.__doc__ = "The stable, machine-readable refusal codes (docs/design.md §12)."
RefusingDecision = StrEnum(  # type: ignore[misc]
    "RefusingDecision",
    {d.upper(): d for d in sorted({cls.decision for cls in ERROR_CLASSES})},
)
RefusingDecision.__doc__ = "Which decision refused: admission, lease, authorization or request."


# -- scalar types -------------------------------------------------------------------------


def _storable(value: str) -> str:
    # PostgreSQL text holds no NUL and UTF-8 has no lone surrogate: a 400, not a DB error.
    if not storable(value):
        raise ValueError("must not contain NUL characters or lone surrogates")
    return value


def _json_storable(value: Any) -> Any:
    if not json_storable(value):
        raise ValueError("strings must not contain NUL characters or lone surrogates")
    return value


def _json_not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("a JSON document, not null")
    return _json_storable(value)


Text = Annotated[str, AfterValidator(_storable)]
# A checkpoint's document: any JSON value but null (a null was a NOT NULL 500, issue 33).
JsonDocument = Annotated[
    Any,
    AfterValidator(_json_not_null),
    WithJsonSchema({"description": "any JSON value but null", "not": {"type": "null"}}),
]
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_storable)]
# Strict: true, "1" and 1.0 are not epochs.
Epoch = Annotated[int, Field(ge=0, le=2**62, strict=True)]
Millis = Annotated[int, Field(ge=1, le=7 * 24 * 3600 * 1000, strict=True)]
Duration = Annotated[int, Field(ge=0, le=MAX_DURATION_MS, strict=True)]
WorkKey = Annotated[str, Field(min_length=1, max_length=200, pattern=KEY_PATTERN)]
UUID_FORMAT = {"format": "uuid"}
LeaseIdIn = Annotated[Text, Field(max_length=64, json_schema_extra=UUID_FORMAT)]
UuidOut = Annotated[str, Field(json_schema_extra=UUID_FORMAT)]
# A lease or effect id in a path: any other string is simply not found (404).
UuidPath = Annotated[str, WithJsonSchema({"type": "string", "format": "uuid", "maxLength": 64})]


class Out(Schema):
    """A response body: every field is always sent, and no other."""

    model_config = ConfigDict(
        json_schema_extra={"additionalProperties": False},
        json_schema_serialization_defaults_required=True,
    )
