"""Is a response one that /api/v1/openapi.json declares? Status, media type, body (JSON
Schema 2020-12, formats included) and required headers; a path or method that no operation
serves must answer a Problem. The API tests run every response they see through this."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from tests.conftest import ApiClient

NOT_OPERATIONS = {"/api/v1/openapi.json", "/api/v1/docs"}
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


@dataclass
class Contract:
    doc: dict[str, Any]
    seen: dict[tuple[str, str], set[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._routes = [
            (re.compile("^" + re.sub(r"\{[^}/]+\}", "[^/]+", template) + "$"), template)
            for template in self.doc["paths"]
        ]
        self._validators: dict[str, Any] = {}

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any] | None] | None:
        """(template, operation or None when the method is not served), or None."""
        for pattern, template in self._routes:
            if pattern.match(path):
                return template, self.doc["paths"][template].get(method.lower())
        return None

    def _validator(self, schema: dict[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            rooted = {**schema, "components": self.doc["components"]}
            self._validators[key] = jsonschema_rs.Draft202012Validator(
                rooted, validate_formats=True
            )
        return self._validators[key]

    def check(
        self, method: str, path: str, status: int, headers: Mapping[str, str], body: bytes
    ) -> None:
        """AssertionError naming what the schema does not declare."""
        path = path.split("?", 1)[0]
        if path in NOT_OPERATIONS or not path.startswith("/api/"):
            return
        where = f"{method} {path} -> {status}"
        found = self.operation(method, path)
        if found is None or found[1] is None:
            # Unrouted: the catch-all's problem, never Django's HTML page.
            assert status in (404, 405), f"{where}: no operation serves this"
            self._check_media(where, headers, "application/problem+json", PROBLEM_REF, body)
            return
        template, operation = found
        assert operation is not None
        self.seen.setdefault((method.upper(), template), set()).add(status)
        declared = operation["responses"]
        assert str(status) in declared, (
            f"{where}: status not declared for {operation['operationId']} "
            f"(declared: {sorted(declared)}); body {body[:300]!r}"
        )
        response = declared[str(status)]
        lower = {k.lower(): v for k, v in headers.items()}
        for name, header in response.get("headers", {}).items():
            if header.get("required"):
                assert name.lower() in lower, f"{where}: required header {name} missing"
        content = response.get("content")
        if not content:
            assert not body, f"{where}: a body the schema does not declare"
            return
        (media, spec), *_ = content.items()
        self._check_media(where, headers, media, spec["schema"], body)

    def _check_media(
        self,
        where: str,
        headers: Mapping[str, str],
        media: str,
        schema: dict[str, Any],
        body: bytes,
    ) -> None:
        lower = {k.lower(): v for k, v in headers.items()}
        got = lower.get("content-type", "").split(";")[0].strip()
        assert got == media, f"{where}: Content-Type {got!r}, the schema says {media!r}"
        try:
            instance = json.loads(body)
        except ValueError:
            raise AssertionError(f"{where}: not JSON: {body[:200]!r}") from None
        errors = [str(e).split("\n")[0] for e in self._validator(schema).iter_errors(instance)]
        assert not errors, f"{where}: body does not match the schema: {errors}; body {instance}"


@functools.cache
def served_contract() -> Contract:
    """The document the server serves (fetched once per test run)."""
    from django.test import Client

    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    return Contract(json.loads(response.content))


class CheckedApiClient(ApiClient):
    """The tests' JSON client; every answer is checked against the contract on arrival."""

    def __init__(self, client: Any, contract: Contract | None = None) -> None:
        super().__init__(client)
        self.contract = contract or served_contract()

    def call(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        response = super().call(method, path, *args, **kwargs)
        self.contract.check(method, path, response.status_code, response.headers, response.content)
        return response
