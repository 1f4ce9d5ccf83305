"""Fixtures shared by the API tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def holder(api, agent):
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
