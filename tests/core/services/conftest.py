"""Fixtures of the core service tests."""

from __future__ import annotations

import pytest

from tests.builders import leased_item


@pytest.fixture
def held(agent):  # type: ignore[no-untyped-def]
    """(executor, lease): the agent "payer" holding a lease on work item "order-9"."""
    executor, _ = agent("payer")
    return executor, leased_item(executor, key="order-9")
