"""Schemathesis fuzzing of /api/v1/openapi.json, in-process through Django's WSGI app.

Every generated request is sent twice: as generated, and with its lease id, work key,
effect id and epoch swapped for real ones held by the authenticated agent, so the fuzzer
reaches past "not found" into the lease and effect services. Some cases also carry a NUL
or a lone surrogate in one of their strings (schemathesis never generates a surrogate).
The rules: no 5xx, ever; every answer is one the schema declares (schemathesis' status,
media type, header and body conformance checks); every 4xx is problem-details JSON whose
`code` is one of docs/design.md §12's codes; a hostile string is always refused (4xx).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.urls import set_urlconf
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis import checks as st_checks

from leaseboard.domain.errors import ALL_CODES
from tests.api.schema_check import served_contract

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

MAX_EXAMPLES = 40  # per operation; the whole module stays well under a minute


@pytest.fixture(autouse=True)
def _no_rate_limits(settings: Any) -> None:
    # A fuzzer is a flood by design; past the limit every operation would only meet 429.
    settings.LEASEBOARD_RATE_LIMIT_ENABLED = False


@pytest.fixture
def _wsgi_in_test_transaction() -> Iterator[None]:
    # Like Django's test client: a request must not close the test's transaction-bound
    # connection when it finishes.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    # A request through the agents' API lane sets this thread's URLconf to the lane's, and
    # only request_finished (which the WSGI calls here do not always send) sets it back:
    # left, the next test in this process cannot reverse a dashboard URL.
    set_urlconf(None)


def _load_schema() -> Any:
    from django.core.wsgi import get_wsgi_application

    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


def _operations(schema: Any) -> list[Any]:
    return [result.ok() for result in schema.get_all_operations()]


FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def world(api: Any, agent: Any) -> dict[str, Any]:
    """A real agent holding a real lease on an admitted work item, with one effect."""
    _, token = agent("fuzzer")
    r = api.post("/api/v1/work-items", {"key": "fuzz-1", "title": "fuzzed"}, token)
    assert r.status_code == 201, r.content
    r = api.post("/api/v1/work-items/fuzz-1/lease", {}, token)
    assert r.status_code == 201, r.content
    grant = r.json_body
    effect = {
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "kind": "payment.refund",
        "target": "order-1",
        "idempotency_key": "fuzz-effect-1",
    }
    r = api.post("/api/v1/effects", effect, token)
    assert r.status_code == 201, r.content
    return {
        "token": token,
        "key": "fuzz-1",
        "lease_id": grant["lease_id"],
        "epoch": grant["epoch"],
        "effect_id": r.json_body["effect_id"],
    }


def _grounded(case: Any, world: dict[str, Any]) -> bool:
    """Point the case at the real objects; False if there was nothing to swap."""
    swapped = False
    real = {"lease_id": world["lease_id"], "key": world["key"], "effect_id": world["effect_id"]}
    for name in list(case.path_parameters or {}):
        if name in real:
            case.path_parameters[name] = real[name]
            swapped = True
    if isinstance(case.body, dict):
        for name, value in (("lease_id", world["lease_id"]), ("epoch", world["epoch"])):
            if name in case.body:
                case.body[name] = value
                swapped = True
        for item in case.body.get("leases") or []:
            if isinstance(item, dict):
                item["lease_id"], item["epoch"] = world["lease_id"], world["epoch"]
                swapped = True
    return swapped


CONFORMANCE = [
    st_checks.not_a_server_error,
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_headers_conformance,
    st_checks.response_schema_conformance,
    st_checks.negative_data_rejection,
]

# NUL (PostgreSQL text cannot hold it) and lone surrogates (no UTF-8 for them). A path
# segment gets only the NUL: a surrogate cannot be percent-encoded as UTF-8 at all.
HOSTILE = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\udbff\u0000"]


def _assert_well_formed(
    case: Any, response: Any, *, changed: bool = False, hostile: bool = False
) -> None:
    """`changed`: the case was edited after generation, so whether it is negative is no
    longer what schemathesis generated it as."""
    where = f"{case.method} {case.formatted_path} body={json.dumps(case.body, default=str)[:500]}"
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:2000]}"
    checks = [c for c in CONFORMANCE if not changed or c is not st_checks.negative_data_rejection]
    case.validate_response(response, checks=checks)
    if hostile:
        assert 400 <= response.status_code < 500, f"{where} -> {response.status_code}"
    if 400 <= response.status_code < 500:
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/problem+json"), f"{where} -> {content_type}"
        body = response.json()
        assert body.get("code") in ALL_CODES, f"{where} -> {body}"
        assert body["status"] == response.status_code and body["title"] and body["detail"]


Slot = tuple[Any, Any, bool]  # (container, key or index, the key itself is the string)


def _resolve(schema: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    options = [o for o in schema.get("anyOf", []) if o.get("type") != "null"]
    return _resolve(options[0], doc) if len(options) == 1 else schema


def _slots(schema: dict[str, Any], value: Any, doc: dict[str, Any]) -> list[Slot]:
    """Every place in `value` where the server reads a string: declared fields (not the
    unknown ones it ignores), and every key and string inside a free-form JSON document."""
    schema = _resolve(schema, doc)
    found: list[Slot] = []
    if isinstance(value, dict):
        declared = schema.get("properties")
        for key, child in list(value.items()):
            if declared is None:  # a JSON document: its keys are stored too
                found.append((value, key, True))
            elif key not in declared:
                continue
            child_schema = {} if declared is None else declared[key]
            if isinstance(child, str):
                found.append((value, key, False))
            else:
                found.extend(_slots(child_schema, child, doc))
    elif isinstance(value, list):
        items = schema.get("items", {})
        for i, child in enumerate(value):
            if isinstance(child, str):
                found.append((value, i, False))
            else:
                found.extend(_slots(items, child, doc))
    return found


def _body_schema(case: Any) -> dict[str, Any] | None:
    found = served_contract().operation(case.method, case.formatted_path)
    body = ((found or ("", None))[1] or {}).get("requestBody")
    return body["content"]["application/json"]["schema"] if body else None


def _poison(case: Any, hostile: str, pick: int) -> bool:
    """Put `hostile` into one string the server reads (a body string or document key, or
    a path parameter); False when the case has no such string."""
    schema = _body_schema(case)
    slots = _slots(schema, case.body, served_contract().doc) if schema else []
    # A path gets the NUL only: a lone surrogate has no UTF-8 to percent-encode.
    paths = [name for name in case.path_parameters or {} if "\x00" in hostile]
    if not slots and not paths:
        return False
    index = pick % (len(slots) + len(paths))
    if index >= len(slots):
        case.path_parameters[paths[index - len(slots)]] = "k" + hostile.encode(
            "utf-8", "ignore"
        ).decode("utf-8")
        return True
    container, key, is_dict_key = slots[index]
    if is_dict_key:
        container[key + hostile] = container.pop(key)
    else:
        container[key] = container[key] + hostile
    return True


def _cases(operation: Any) -> Any:
    plain = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    hostile = st.one_of(st.none(), st.sampled_from(HOSTILE))
    return st.tuples(plain, hostile, st.integers(min_value=0, max_value=10**6))


def test_the_api_never_answers_5xx_and_every_refusal_has_a_known_code(
    _wsgi_in_test_transaction: None, world: dict[str, Any]
) -> None:
    auth = {"Authorization": f"Bearer {world['token']}"}
    operations = _operations(_load_schema())
    assert len(operations) >= 10
    seen: dict[str, set[int]] = {}
    hostile_seen: set[str] = set()

    for operation in operations:

        @FUZZ
        @given(drawn=_cases(operation))
        def fuzz(drawn: tuple[Any, str | None, int]) -> None:
            case, hostile, pick = drawn
            statuses = seen.setdefault(f"{case.method} {case.path}", set())
            response = case.call(headers=auth)
            statuses.add(response.status_code)
            _assert_well_formed(case, response)
            grounded = _grounded(case, world)
            poisoned = hostile is not None and _poison(case, hostile, pick)
            if grounded or poisoned:
                case.headers = {**(case.headers or {}), **auth}
                response = case.call()
                statuses.add(response.status_code)
                _assert_well_formed(case, response, changed=True, hostile=poisoned)
                if poisoned:
                    hostile_seen.add(f"{case.method} {case.path}")

        fuzz()

    print({op: sorted(codes) for op, codes in sorted(seen.items())})
    # The grounded requests reach the services, not only the parsers.
    assert 200 in seen["POST /api/v1/leases/{lease_id}/renew"] | seen["POST /api/v1/leases/renew"]
    assert seen["POST /api/v1/effects"] - {400, 401, 404}
    # Hostile strings reached every operation that takes a string.
    assert {op for op in seen if op.startswith("POST")} <= hostile_seen, hostile_seen


def test_without_a_valid_token_every_answer_is_a_problem_or_public(
    _wsgi_in_test_transaction: None,
) -> None:
    auth = {"Authorization": "Bearer lb_not-a-real-token"}
    for operation in _operations(_load_schema()):

        @settings(FUZZ, max_examples=5)
        @given(drawn=_cases(operation))
        def fuzz(drawn: tuple[Any, str | None, int]) -> None:
            _assert_well_formed(drawn[0], drawn[0].call(headers=auth))

        fuzz()
