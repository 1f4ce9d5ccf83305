"""leaseboard.api.openapi: the document a ContractAPI serves is the contract. Here on a
small API of its own (a request schema with defaults, a body that may be left out, a
response schema with defaults, an optional problem member) and on the served API's links;
tests/api/test_contract.py checks the served document against the server's answers."""

from __future__ import annotations

import itertools
from typing import Any

from ninja import Schema

from leaseboard.api.errors import PROBLEM_JSON
from leaseboard.api.openapi import ALWAYS, LINKS, PROBLEM_REF, ContractAPI, problems

_names = itertools.count(1)


class Problem(Schema):
    type: str
    code: str
    instance: str | None = None


class Options(Schema):
    wait_ms: int = 500
    tags: list[str] = []
    hint: str | None = None


class Ask(Schema):
    note: str
    limit: int = 10
    options: Options = Options()


class Answer(Schema):
    count: int = 0


class Tune(Schema):
    level: int = 3


def _document() -> dict[str, Any]:
    api = ContractAPI(
        title="t",
        version="1",
        urls_namespace=f"openapi-test-{next(_names)}",
        problem_schema=Problem,
    )

    @api.post("/ask", response=Answer, operation_id="ask", openapi_extra=problems(400, 409))
    def ask(request: Any, body: Ask) -> Answer:
        return Answer()

    @api.post("/tune", response=Answer, operation_id="tune", openapi_extra=problems(401))
    def tune(request: Any, body: Tune | None = None) -> Answer:
        return Answer()

    return api.get_openapi_schema(path_prefix="")


def test_problems_declares_the_refusals_and_the_ones_every_operation_may_answer() -> None:
    responses = problems(409, 401, retry_after=(409,))["responses"]
    assert sorted(responses) == sorted({401, 409, *ALWAYS})
    for response in responses.values():
        assert response["content"] == {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}}
        assert response["description"].split(":")[0]
    assert responses[429]["headers"]["Retry-After"]["required"] is True
    assert responses[503]["headers"]["Retry-After"]["required"] is True
    assert "required" not in responses[409]["headers"]["Retry-After"]  # a lock delay, maybe
    assert responses[401]["headers"]["WWW-Authenticate"]["required"] is True
    assert "headers" not in responses[413]


def test_the_problem_schema_is_published_with_optional_members_never_null() -> None:
    problem = _document()["components"]["schemas"]["Problem"]
    assert problem["required"] == ["type", "code"]
    instance = problem["properties"]["instance"]
    assert instance["type"] == "string" and "anyOf" not in instance and "default" not in instance


def test_a_body_the_server_can_do_without_is_optional_and_not_nullable() -> None:
    doc = _document()
    body = doc["paths"]["/tune"]["post"]["requestBody"]
    assert body["required"] is False
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Tune"}
    assert doc["paths"]["/ask"]["post"]["requestBody"].get("required", True) is True


def test_request_only_schemas_lose_their_defaults_to_the_description() -> None:
    schemas = _document()["components"]["schemas"]
    ask = schemas["Ask"]["properties"]
    assert "default" not in ask["limit"] and ask["limit"]["description"] == "Default: 10."
    assert "default" not in ask["options"] and "allOf" not in ask["options"]
    options = schemas["Options"]["properties"]  # reached from a request only: also stripped
    assert (
        "default" not in options["wait_ms"] and "Default: 500." in options["wait_ms"]["description"]
    )
    assert options["tags"]["description"] == "Default: []."
    assert "default" not in options["hint"] and "description" not in options["hint"]  # None
    assert schemas["Answer"]["properties"]["count"]["default"] == 0  # a response keeps it
    assert list(schemas) == sorted(schemas)


def test_the_served_document_links_each_grant_to_the_calls_that_take_its_ids() -> None:
    from leaseboard.api.v1 import api

    doc = api.get_openapi_schema(path_prefix="/api/v1")
    by_id = {op["operationId"]: op for item in doc["paths"].values() for op in item.values()}
    for operation_id, statuses in LINKS.items():
        for status, links in statuses.items():
            assert by_id[operation_id]["responses"][status]["links"] == links
    renew = by_id["acquire_lease"]["responses"][201]["links"]["renew"]
    assert renew["operationId"] == "renew_lease" and renew["operationId"] in by_id
    assert renew["parameters"] == {"path.lease_id": "$response.body#/lease_id"}
    assert renew["requestBody"] == {"epoch": "$response.body#/epoch"}
