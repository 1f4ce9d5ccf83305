"""Fixtures of the SDK tests: `clock` and `server` (the SDK offline, against the fake
server of fakes.py on a clock the test moves) and `live` (the SDK against a real running
Leaseboard through a proxy, on a lockstep clock; see harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from leaseboard_client import Renewer
from tests.client.fakes import FakeClock, FakeServer
from tests.client.harness import Live, LockstepClock, Proxy


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> FakeServer:
    return FakeServer(clock)


@pytest.fixture
def live(live_server, agent, db_clock) -> Iterator[Live]:  # type: ignore[no-untyped-def]
    _, token = agent()
    # Warm the server up so the SDK's short request timeout measures steady-state latency.
    httpx.get(f"{live_server.url}/api/v1/fencing/keys", timeout=30).raise_for_status()
    clock = LockstepClock(db_clock)
    proxy = Proxy(live_server.url)
    state = Live(
        url=live_server.url,
        proxy=proxy,
        clock=clock,
        renewer=Renewer(clock=clock, start_thread=False),
        token=token,
    )
    try:
        yield state
    finally:
        for client in state.clients:
            client.close()
        proxy.close()
