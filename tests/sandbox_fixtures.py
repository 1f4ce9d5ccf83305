"""Fixtures for the payments sandbox tests: a fresh fence per test and a lease-holding agent.

Import the fixtures you use into the test module (they are not in conftest.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@pytest.fixture(name="fresh_fence")
def fresh_fence_fixture():  # type: ignore[no-untyped-def]
    """Each test database has its own signing key: drop keys cached by earlier tests."""
    from leaseboard.core.services.fencing import fencing_keys_forget
    from leaseboard.sandbox import fence

    fencing_keys_forget()
    fence._verifier = None
    fence._reporters.clear()
    yield fence
    for reporter in list(fence._reporters.values()):
        reporter.close(timeout_s=2.0)
    fence._reporters.clear()
    fence._verifier = None


@dataclass
class Holder:
    api: Any
    token: str
    key: str
    lease_id: str = ""
    epoch: int = 0
    fencing_token: str = ""

    def acquire(self) -> Holder:
        r = self.api.post(f"/api/v1/work-items/{self.key}/lease", {}, self.token)
        assert r.status_code == 201, r.content
        body = r.json_body
        return Holder(
            self.api, self.token, self.key, body["lease_id"], body["epoch"], body["fencing_token"]
        )

    def effect(self, idempotency_key: str) -> dict:
        r = self.api.post(
            "/api/v1/effects",
            {
                "lease_id": self.lease_id,
                "epoch": self.epoch,
                "kind": "payment.charge",
                "target": "sandbox:acme",
                "idempotency_key": idempotency_key,
            },
            self.token,
        )
        assert r.status_code == 201 and r.json_body["decision"] == "authorized", r.content
        return r.json_body

    def release(self) -> None:
        r = self.api.post(
            f"/api/v1/leases/{self.lease_id}/release", {"epoch": self.epoch}, self.token
        )
        assert r.status_code == 200, r.content


@pytest.fixture(name="holder_factory")
def holder_factory_fixture(api, agent):  # type: ignore[no-untyped-def]
    """holder_factory(key) -> Holder with an admitted work item and a granted lease."""

    def make(key: str) -> Holder:
        _, token = agent()
        r = api.post("/api/v1/work-items", {"key": key}, token)
        assert r.status_code == 201, r.content
        return Holder(api, token, key).acquire()

    return make


def pay(client: Any, headers: dict[str, str], amount: int = 500, key: str = "") -> Any:
    """POST /sandbox/payments through Django's test client with fencing headers."""
    import json

    extra = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}
    body = {"amount_cents": amount, "currency": "EUR", "payee": "acme"}
    if key:
        body["idempotency_key"] = key
    response = client.post(
        "/sandbox/payments", data=json.dumps(body), content_type="application/json", **extra
    )
    response.json_body = json.loads(response.content or b"null")
    return response


def fencing_headers(holder: Holder, token: str | None = None) -> dict[str, str]:
    return {
        "X-Fencing-Token": token or holder.fencing_token,
        "X-Lease-Epoch": str(holder.epoch),
        "X-Work-Key": holder.key,
    }
