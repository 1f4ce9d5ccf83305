"""The API's JSON in and out through orjson: parsing and rendering in C. Rendering falls
back to ninja's encoder for what orjson does not know (pydantic models, Decimal) and for
datetimes, so every value is written as before."""

from __future__ import annotations

from typing import Any, cast

import orjson
from django.http import HttpRequest
from ninja.parser import Parser
from ninja.renderers import BaseRenderer
from ninja.responses import NinjaJSONEncoder
from ninja.types import DictStrAny

_fallback = NinjaJSONEncoder().default
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME


class OrjsonRenderer(BaseRenderer):
    media_type = "application/json"

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> Any:
        return orjson.dumps(data, default=_fallback, option=_OPTIONS)


class OrjsonParser(Parser):
    def parse_body(self, request: HttpRequest) -> DictStrAny:
        # orjson.JSONDecodeError is a json.JSONDecodeError: ninja answers it as before.
        body = orjson.loads(request.body)
        if not isinstance(body, dict):
            # Every request body of this API is an object; a list or a scalar must not be
            # read as one whose fields are all absent (`[null, null]` acquired a lease).
            raise ValueError("a request body is a JSON object")
        return cast(DictStrAny, body)
