"""API tests see every response through the contract: `api` checks each answer against
/api/v1/openapi.json (status, media type, body, required headers) as it arrives."""

from __future__ import annotations

import pytest

from tests.api.schema_check import CheckedApiClient, Contract, served_contract


@pytest.fixture
def contract() -> Contract:
    return served_contract()


@pytest.fixture
def api(client, contract):  # type: ignore[no-untyped-def]
    return CheckedApiClient(client, contract)


@pytest.fixture
def holder(api, agent):  # type: ignore[no-untyped-def]
    """An agent holding order-1 at epoch 1: (token, the acquire's answer)."""
    _, token = agent("holder")
    r = api.post("/api/v1/work-items", {"key": "order-1", "title": "refund order 1"}, token)
    assert r.status_code == 201 and r.json_body == {
        "key": "order-1",
        "admission": "admitted",
        "epoch": 0,
        "code": None,
    }
    r = api.post("/api/v1/work-items/order-1/lease", {}, token)
    assert r.status_code == 201, r.content
    return token, r.json_body
