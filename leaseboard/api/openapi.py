"""The OpenAPI document says exactly what the server does, in a form that generated
clients (openapi-python-client, openapi-typescript) can trust.

- `problems(...)` declares the refusals one operation can answer, as
  application/problem+json with the Problem schema; every operation may also answer 413 (the
  body limit), 429 (rate limits, with Retry-After), 500 (internal_error, with a request id)
  and 503 (unavailable: the database could not answer; with Retry-After).
- `finish(schema)` turns ninja's document into the contract: a body the server does not
  need is optional (not `X | null`), no request field with a default is required in any
  generator, the Problem schema is published, and OpenAPI links say which answer's ids the
  next calls take (a grant's lease id and epoch for renew, release, checkpoints and
  effects; an effect's id for its outcome), for clients and for stateful fuzzing.
"""

from __future__ import annotations

import json
from typing import Any

from ninja import NinjaAPI

from leaseboard.api.errors import PROBLEM_JSON

PROBLEM_REF = "#/components/schemas/Problem"
# The body limit, the rate limits, an internal error and the database failing can answer
# any operation.
ALWAYS = (413, 429, 500, 503)

DESCRIPTIONS = {
    400: "validation_error: the request is not valid",
    401: "unauthenticated: missing or invalid credentials",
    403: "not_holder, policy_denied, queue_not_allowed or forbidden: not this caller's to do",
    404: "not_found: no such object",
    409: "a lease, admission or authorization refusal (see `code` and `decision`)",
    413: "validation_error: the request body is larger than the limit",
    429: "rate_limited: too many requests; retry after Retry-After seconds",
    500: "internal_error: an unexpected error, logged under the answer's request_id",
    503: "unavailable: the database could not answer and nothing was changed (unless "
    "reason is commit_unknown); retry after Retry-After seconds",
}
RETRY_AFTER = {
    "description": "seconds to wait before retrying",
    "schema": {"type": "integer", "minimum": 1},
}
WWW_AUTHENTICATE = {"description": "the scheme to authenticate with", "schema": {"type": "string"}}


def problems(*statuses: int, retry_after: tuple[int, ...] = ()) -> dict[str, Any]:
    """`openapi_extra` for an operation that can refuse with `statuses` (ALWAYS are
    added). `retry_after`: statuses that may also carry Retry-After (a lock delay)."""
    responses: dict[int, Any] = {}
    for status in sorted({*statuses, *ALWAYS}):
        response: dict[str, Any] = {
            "description": DESCRIPTIONS[status],
            "content": {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}},
        }
        if status in (429, 503):
            response["headers"] = {"Retry-After": {**RETRY_AFTER, "required": True}}
        elif status in retry_after:
            response["headers"] = {"Retry-After": RETRY_AFTER}
        elif status == 401:
            response["headers"] = {"WWW-Authenticate": {**WWW_AUTHENTICATE, "required": True}}
        responses[status] = response
    return {"responses": responses}


class ContractAPI(NinjaAPI):
    """A NinjaAPI whose document is finished by `finish`; `problem_schema` is published
    under components/schemas/Problem."""

    def __init__(self, *args: Any, problem_schema: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.problem_schema = problem_schema

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        return finish(schema, self.problem_schema)


def _schema_json(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from ninja.schema import NinjaGenerateJsonSchema

    doc = model.model_json_schema(
        ref_template="#/components/schemas/{model}",
        schema_generator=NinjaGenerateJsonSchema,
        mode="serialization",
    )
    return doc, doc.pop("$defs", {})


def _references(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_references(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = set()
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
        found.add(ref.rsplit("/", 1)[-1])
    for value in node.values():
        found |= _references(value)
    return found


def _optional_body(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`X | None` (ninja's optional body, pydantic's optional field) -> X."""
    options = schema.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        return next(o for o in options if o != {"type": "null"})
    return None


def _without_defaults(schema: dict[str, Any]) -> None:
    """A request schema's defaults move into the descriptions: openapi-typescript makes a
    property with a `default` required (right for responses, wrong for a request a client
    may leave out); the server applies the default either way."""
    for name, prop in schema.get("properties", {}).items():
        if "default" not in prop:
            continue
        default = prop.pop("default")
        only = prop.get("allOf")
        if isinstance(only, list) and len(only) == 1 and len(prop) == 1:
            prop = schema["properties"][name] = only[0]  # pydantic's wrapper for the default
        if default is not None and default != {}:
            note = f"Default: {json.dumps(default)}."
            prop["description"] = f"{prop['description']} {note}" if "description" in prop else note


def _link(
    operation_id: str,
    description: str,
    path: dict[str, str] | None = None,
    body: dict[str, str] | None = None,
) -> dict[str, Any]:
    link: dict[str, Any] = {"operationId": operation_id, "description": description}
    if path:
        link["parameters"] = {f"path.{name}": value for name, value in path.items()}
    if body:
        link["requestBody"] = body
    return link


_LEASE_ID = {"lease_id": "$response.body#/lease_id"}
_EPOCH = {"epoch": "$response.body#/epoch"}
_HELD = {
    "renew": _link("renew_lease", "renew this grant", _LEASE_ID, _EPOCH),
    "release": _link("release_lease", "release this grant", _LEASE_ID, _EPOCH),
    "checkpoint": _link("save_checkpoint", "save a checkpoint under it", _LEASE_ID, _EPOCH),
    "propose": _link("propose_effect", "propose an effect under it", body=_LEASE_ID | _EPOCH),
}
# operationId -> status -> {link name: link}
LINKS: dict[str, dict[int, dict[str, Any]]] = {
    "admit_work_item": {
        201: {"acquire": _link("acquire_lease", "lease it", {"key": "$response.body#/key"})},
    },
    "acquire_lease": {201: _HELD},
    "renew_lease": {200: _HELD},
    "propose_effect": {
        status: {
            "outcome": _link(
                "report_outcome", "report its outcome", {"effect_id": "$response.body#/effect_id"}
            )
        }
        for status in (201, 202)
    },
}


def finish(schema: dict[str, Any], problem_model: Any) -> dict[str, Any]:
    """Publish the Problem schema (optional members absent, never null), make bodies the
    server can do without optional, and take defaults out of request-only schemas."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    problem, defs = _schema_json(problem_model)
    for name, prop in problem["properties"].items():
        if name not in problem["required"]:
            # An optional member is left out where it does not apply, never sent as null.
            prop.pop("default", None)
            inner = _optional_body(prop)
            if inner is not None:
                problem["properties"][name] = {
                    **inner,
                    **{k: v for k, v in prop.items() if k != "anyOf"},
                }
    schemas.update(defs)
    schemas["Problem"] = problem

    requests: set[str] = set()
    for item in schema["paths"].values():
        for operation in item.values():
            for status, links in LINKS.get(operation.get("operationId", ""), {}).items():
                operation["responses"][status]["links"] = links
            body = operation.get("requestBody")
            if not body:
                continue
            media = body["content"]["application/json"]
            inner = _optional_body(media["schema"])
            if inner is not None:  # ninja's `X | None = None`: the body may be left out
                media["schema"], body["required"] = inner, False
            requests |= _references(media["schema"])
    for name in _closure(requests, schemas) - _closure(_response_refs(schema), schemas):
        _without_defaults(schemas[name])
    components["schemas"] = dict(sorted(schemas.items()))
    return schema


def _closure(names: set[str], schemas: dict[str, Any]) -> set[str]:
    found = set(names)
    while True:
        more = set().union(*(_references(schemas.get(n, {})) for n in found)) - found
        if not more:
            return found
        found |= more


def _response_refs(schema: dict[str, Any]) -> set[str]:
    return {
        name
        for item in schema["paths"].values()
        for operation in item.values()
        for name in _references(operation.get("responses", {}))
    }
