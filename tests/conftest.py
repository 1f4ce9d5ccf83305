"""Test set-up: real PostgreSQL and Redis.

With CI=true a missing PostgreSQL or Redis fails the run. Elsewhere, tests that need them
are skipped with the reason. Fixtures here are shared by tests in more than one folder;
a folder's own fixtures are in its conftest.py, and test data comes from tests/builders.py.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from typing import Any

import pytest

from tests.builders import leased_item, make_user
from tests.pg_env import IN_CI, PG_OK, PG_URL, REDIS_OK, REDIS_URL, XDIST_WORKER


def pytest_configure(config: pytest.Config) -> None:
    missing = [name for name, ok in (("PostgreSQL", PG_OK), ("Redis", REDIS_OK)) if not ok]
    if IN_CI and missing:
        raise pytest.UsageError(
            f"CI=true but {' and '.join(missing)} is not reachable "
            f"(DATABASE_URL={PG_URL}, TEST_REDIS_URL={REDIS_URL}); .ci/run starts them"
        )
    # tests.pg_env picked this worker's Redis database from PYTEST_XDIST_WORKER when it was
    # imported: make sure that was the worker xdist says this is.
    workerid = getattr(config, "workerinput", {}).get("workerid", "")
    if workerid != XDIST_WORKER:
        raise pytest.UsageError(
            f"xdist worker {workerid!r} but PYTEST_XDIST_WORKER was {XDIST_WORKER!r} when "
            "tests.pg_env chose the worker's Redis database"
        )


DB_FIXTURES = {"db", "transactional_db", "live_server", "django_db_setup"}


# Tests that start servers, browsers or clusters run first, longest kind first, so the
# parallel workers share them out at the start instead of one worker finishing the run
# alone with the cluster test while the other idles (pytest-xdist hands out tests in
# collection order). pytest-django's order is kept where it matters: tests on the
# database without a transaction, then transactional ones (whose flush empties the tables
# the first kind expects seeded); slow tests that never touch Django's database can go
# anywhere, so they go first. Within each kind a module's tests keep their order.
SLOW_FIRST = ("ha", "slow", "browser")


def _slowness(item: pytest.Item) -> int:
    for rank, marker in enumerate(SLOW_FIRST):
        if item.get_closest_marker(marker) is not None:
            return rank
    return len(SLOW_FIRST)


def _database_kind(item: pytest.Item) -> int:
    """0: Django's database in a rolled-back transaction, 1: transactional (flushed
    after), 2: no Django database (as pytest-django's own ordering decides)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    if (marker is not None and marker.kwargs.get("transaction")) or (
        {"transactional_db", "live_server"} & fixtures
    ):
        return 1
    return 0 if marker is not None or "db" in fixtures else 2


def _run_order(items: list[pytest.Item]) -> None:
    kinds = {id(item): _database_kind(item) for item in items}
    rank: dict[tuple[str, int], int] = {}
    for item in items:
        key = (item.nodeid.split("::")[0], kinds[id(item)])
        rank[key] = min(rank.get(key, len(SLOW_FIRST)), _slowness(item))

    def order(item: pytest.Item) -> tuple[int, int]:
        kind = kinds[id(item)]
        slowness = rank[(item.nodeid.split("::")[0], kind)]
        if kind == 2:
            return (0 if slowness < len(SLOW_FIRST) else 3, slowness)
        return (kind + 1, slowness)

    items.sort(key=order)  # stable


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _run_order(items)
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        needs_db = bool(fixtures & DB_FIXTURES) or item.get_closest_marker("django_db")
        if (needs_db or item.get_closest_marker("postgres")) and not PG_OK:
            item.add_marker(pytest.mark.skip(reason=f"PostgreSQL not reachable at {PG_URL}"))
        if (item.get_closest_marker("redis") or "redis_url" in fixtures) and not REDIS_OK:
            item.add_marker(pytest.mark.skip(reason=f"Redis not reachable at {REDIS_URL}"))


@pytest.fixture
def redis_url() -> str:
    return REDIS_URL


def _reload_urls() -> None:
    import importlib

    from django.urls import clear_url_caches

    import leaseboard.urls

    importlib.reload(leaseboard.urls)
    clear_url_caches()


@pytest.fixture
def demo_mounted():  # type: ignore[no-untyped-def]
    """The URL map as `dev.py demo` builds it (LEASEBOARD_DEMO on: the payments sandbox
    mounted); the ordinary map again afterwards."""
    from django.test import override_settings

    with override_settings(LEASEBOARD_DEMO=True):
        _reload_urls()
        yield
    _reload_urls()


@pytest.fixture(autouse=True)
def _alerts_one_per_event(request: pytest.FixtureRequest, settings) -> None:  # type: ignore[no-untyped-def]
    """The suite counts one alert per event; folding recurrences into incidents and bursts
    into one incident of their queue (on by default, LEASEBOARD_ALERT_FOLD_WINDOW_MS and
    LEASEBOARD_ALERT_BURST_WINDOW_MS) is tested where `alert_folding` marks it."""
    if request.node.get_closest_marker("alert_folding") is None:
        settings.LEASEBOARD_ALERT_FOLD_WINDOW_MS = 0
        settings.LEASEBOARD_ALERT_BURST_WINDOW_MS = 0


@pytest.fixture(autouse=True)
def _default_rows(request: pytest.FixtureRequest) -> None:
    """Transactional tests truncate every table; put back what migrations seed."""
    marker = request.node.get_closest_marker("django_db")
    transactional = (marker is not None and marker.kwargs.get("transaction")) or bool(
        {"transactional_db", "live_server"} & set(request.fixturenames)
    )
    from leaseboard.api.ratelimit import rate_limits_forget
    from leaseboard.core.dbfaults import breaker
    from leaseboard.core.services.executors import token_cache_forget
    from leaseboard.core.services.fencing import fencing_keys_forget
    from leaseboard.core.services.rule_sets import policy_caches_forget
    from leaseboard.sweeps.wakeups import wakeups

    # Truncated tables may have taken the cached signing key and executors with them.
    fencing_keys_forget()
    # Rolled-back tests reuse policy versions: a rule set compiled for another test's
    # version must not decide this one's effects.
    policy_caches_forget()
    token_cache_forget()
    rate_limits_forget()  # each test starts with fresh in-memory rate-limit budgets
    breaker.reset()  # and with no database failure remembered from an earlier test
    wakeups.reset()  # nor a wake-up coalesced with one of an earlier test
    if transactional and PG_OK:
        request.getfixturevalue("transactional_db")
        from leaseboard.core.models import Queue

        Queue.objects.get_or_create(name="default")


@pytest.fixture
def agent(db):  # type: ignore[no-untyped-def]
    """Factory: agent(name=None, queues=None) -> (Executor, token). Without `queues` the
    agent may use every queue (said explicitly, as agent_create asks)."""
    from leaseboard.core.services.executors import agent_create

    counter = {"n": 0}

    def make(name: str | None = None, queues: list[str] | None = None):  # type: ignore[no-untyped-def]
        counter["n"] += 1
        return agent_create(
            name=name or f"agent-{os.getpid()}-{counter['n']}",
            queues=queues,
            all_queues=queues is None,
            actor_name="test",
        )

    return make


@pytest.fixture
def recipient(db):  # type: ignore[no-untyped-def]
    """Factory: recipient(name=None) -> (Recipient, credential)."""
    from leaseboard.core.services.recipients import recipient_create

    counter = {"n": 0}

    def make(name: str | None = None):  # type: ignore[no-untyped-def]
        counter["n"] += 1
        return recipient_create(name=name or f"recipient-{os.getpid()}-{counter['n']}")

    return make


class ApiClient:
    """Django's test client speaking JSON with a bearer token."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        token: str | None = None,
        raw: bytes | str | None = None,
    ) -> Any:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        fn = getattr(self.client, method.lower())
        if data is None:
            response = fn(path, **headers)
        else:
            response = fn(path, data=data, content_type="application/json", **headers)
        try:
            response.json_body = json.loads(response.content or b"null")
        except ValueError:
            response.json_body = None
        return response

    def post(self, path: str, body: Any = None, token: str | None = None, **kw: Any) -> Any:
        return self.call("POST", path, body, token, **kw)

    def get(self, path: str, token: str | None = None) -> Any:
        return self.call("GET", path, None, token)


@pytest.fixture
def api(client):  # type: ignore[no-untyped-def]
    return ApiClient(client)


@pytest.fixture
def db_clock(settings):  # type: ignore[no-untyped-def]
    """Move the database clock (in SQL) for this process: db_clock.advance(ms)."""

    class Clock:
        def advance(self, ms: int) -> None:
            settings.LEASEBOARD_DB_CLOCK_OFFSET_MS += ms

    settings.LEASEBOARD_DB_CLOCK_OFFSET_MS = 0
    return Clock()


@pytest.fixture
def operator(db):  # type: ignore[no-untyped-def]
    """An operator (olivia), for the pages of every app."""
    return make_user("olivia", "operator")


@pytest.fixture
def operator_client(client, operator):  # type: ignore[no-untyped-def]
    """Django's test client signed in as `operator`."""
    client.force_login(operator)
    return client


@pytest.fixture
def fast_passwords(settings):  # type: ignore[no-untyped-def]
    # PBKDF2 at full strength costs ~0.3 s per user; the takeover tests make several per test.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


_seq = itertools.count(1)


@dataclass
class People:
    operator: Any
    approver: Any
    manager: Any


@pytest.fixture
def people(db) -> People:  # type: ignore[no-untyped-def]
    """One person in each takeover role."""
    n = next(_seq)
    return People(
        operator=make_user(f"olga{n}", "operator"),
        approver=make_user(f"abe{n}", "approver"),
        manager=make_user(f"mia{n}", "manager"),
    )


@dataclass
class Scene:
    agent: Any
    token: str
    lease: Any
    key: str


@pytest.fixture
def scene(agent) -> Scene:  # type: ignore[no-untyped-def]
    """An agent holding a fresh lease on a new work item."""
    executor, token = agent()
    key = f"to-{next(_seq)}"
    lease = leased_item(executor, key=key)
    return Scene(agent=executor, token=token, lease=lease, key=key)
