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
