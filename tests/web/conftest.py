"""Fixtures for the web tests: an operator, signed in through Django's test client."""

from __future__ import annotations

import pytest

from tests.builders import make_user


@pytest.fixture
def operator(db):  # type: ignore[no-untyped-def]
    return make_user("olivia", "operator")


@pytest.fixture
def operator_client(client, operator):  # type: ignore[no-untyped-def]
    client.force_login(operator)
    return client
