"""Fixtures for the payments sandbox tests: a fresh fence per test and a lease-holding agent."""

from __future__ import annotations

import pytest

from tests.builders import Holder


@pytest.fixture
def fresh_fence():  # type: ignore[no-untyped-def]
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


@pytest.fixture
def holder_factory(api, agent):  # type: ignore[no-untyped-def]
    """holder_factory(key) -> Holder with a work item admitted to `payments` (the only queue
    the sandbox, a payments service, accepts effects from) and a granted lease."""
    from leaseboard.core.models import Queue

    Queue.objects.get_or_create(name="payments")

    def make(key: str, queue: str = "payments") -> Holder:
        _, token = agent()
        r = api.post("/api/v1/work-items", {"key": key, "queue": queue}, token)
        assert r.status_code == 201, r.content
        return Holder(api, token, key).acquire()

    return make
