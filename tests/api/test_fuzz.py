"""Schemathesis fuzzing of /api/v1/openapi.json, in-process through Django's WSGI app.

Every generated request is sent twice: as generated, and with its lease id, work key,
effect id and epoch swapped for real ones held by the authenticated agent, so the fuzzer
reaches past "not found" into the lease and effect services. The rules: no 5xx, ever;
every 4xx is problem-details JSON whose `code` is one of DESIGN §12's codes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from leaseboard.domain.errors import ALL_CODES

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


def _assert_well_formed(case: Any, response: Any) -> None:
    where = f"{case.method} {case.formatted_path} body={json.dumps(case.body, default=str)[:500]}"
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:2000]}"
    if 400 <= response.status_code < 500:
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/problem+json"), f"{where} -> {content_type}"
        body = response.json()
        assert body.get("code") in ALL_CODES, f"{where} -> {body}"
        assert body["status"] == response.status_code and body["title"] and body["detail"]


def _cases(operation: Any) -> Any:
    return st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )


def test_the_api_never_answers_5xx_and_every_refusal_has_a_known_code(
    _wsgi_in_test_transaction: None, world: dict[str, Any]
) -> None:
    auth = {"Authorization": f"Bearer {world['token']}"}
    operations = _operations(_load_schema())
    assert len(operations) >= 10
    seen: dict[str, set[int]] = {}

    for operation in operations:

        @FUZZ
        @given(case=_cases(operation))
        def fuzz(case: Any) -> None:
            statuses = seen.setdefault(f"{case.method} {case.path}", set())
            response = case.call(headers=auth)
            statuses.add(response.status_code)
            _assert_well_formed(case, response)
            if _grounded(case, world):
                case.headers = {**(case.headers or {}), **auth}
                response = case.call()
                statuses.add(response.status_code)
                _assert_well_formed(case, response)

        fuzz()

    print({op: sorted(codes) for op, codes in sorted(seen.items())})
    # The grounded requests reach the services, not only the parsers.
    assert 200 in seen["POST /api/v1/leases/{lease_id}/renew"] | seen["POST /api/v1/leases/renew"]
    assert seen["POST /api/v1/effects"] - {400, 401, 404}


def test_without_a_valid_token_every_answer_is_a_problem_or_public(
    _wsgi_in_test_transaction: None,
) -> None:
    auth = {"Authorization": "Bearer lb_not-a-real-token"}
    for operation in _operations(_load_schema()):

        @settings(FUZZ, max_examples=5)
        @given(case=_cases(operation))
        def fuzz(case: Any) -> None:
            _assert_well_formed(case, case.call(headers=auth))

        fuzz()
