"""A commit that outlives the request's deadline (docs/design.md §14, #34): on a PostgreSQL
of the test's own whose `synchronous_standby_names` names a standby that never comes, every
COMMIT waits forever (statement_timeout does not bound that wait). The watchdog cuts the
connection at the deadline and the API answers 503 `unavailable` with reason
`commit_unknown` — never a success, never a 500 — and the commit may indeed happen later.
The SDK never acts on such an answer: an effect is proposed again with the same
idempotency key (its first answer, if there was one), an acquire asks again and releases
the grant whose token it never received.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from leaseboard_client import AsyncClient, Client, CommitUnknown
from tests.faults.stack import Stack, own_stack, problem
from tests.ha_generation.pair import Primary

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db]

DEADLINE_MS = 1000  # the stack's API deadline (the shipped default is 1800)
NEVER = "standby_that_never_comes"


@pytest.fixture(scope="module")
def sync_stack(django_db_setup, django_db_blocker) -> Iterator[Stack]:  # type: ignore[no-untyped-def]
    deadline = {"LEASEBOARD_API_DEADLINE_MS": str(DEADLINE_MS)}
    with own_stack(django_db_blocker, "lb-ha-commit-", Primary, extra_env=deadline) as stack:
        try:
            yield stack
        finally:
            stack.pg.require_standby("")  # type: ignore[attr-defined]  # release any waiter


def wait_for(what: str, ready: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.05)


class Seen:
    """Records what each request was answered (a 503's reason), and runs `on_unknown` once,
    right after the first 503 commit_unknown (the standby coming back between the agent's
    two asks). Mixed into a real HTTP transport, sync or async."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, object]] = []
        self.on_unknown: Callable[[], None] | None = None

    def note(self, request: httpx.Request, response: httpx.Response) -> None:
        said: object = response.status_code
        if response.status_code == 503:
            said = json.loads(response.content).get("reason")
        self.seen.append((request.method, request.url.path, said))
        if said == "commit_unknown" and self.on_unknown is not None:
            hook, self.on_unknown = self.on_unknown, None
            hook()


class Watched(Seen, httpx.HTTPTransport):
    """A real HTTP transport that notes each answer (`Seen`)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        self.note(request, response)
        return response


def test_a_commit_past_the_deadline_answers_503_commit_unknown_and_may_happen_after(
    sync_stack: Stack,
) -> None:
    primary: Primary = sync_stack.pg  # type: ignore[assignment]
    api = sync_stack.api()
    for key in ("a", "b"):
        assert api.post("/api/v1/work-items", json={"key": key}).status_code == 201
    lease_b = api.post("/api/v1/work-items/b/lease", json={}).json()
    primary.require_standby(NEVER)

    answers = {}
    for name, path, body in (
        ("acquire", "/api/v1/work-items/a/lease", {}),
        (
            "effect",
            "/api/v1/effects",
            {
                "lease_id": lease_b["lease_id"],
                "epoch": lease_b["epoch"],
                "kind": "payment.refund",
                "target": "inv-b",
                "idempotency_key": "fx-b",
            },
        ),
    ):
        started = time.monotonic()
        r = api.post(path, json=body)
        elapsed = time.monotonic() - started
        assert r.status_code == 503, (name, r.status_code, r.text[:300])
        answer = problem(r)
        assert (answer["code"], answer["reason"]) == ("unavailable", "commit_unknown"), (
            answer,
            sync_stack.log("web"),
        )
        assert "may or may not have been applied" in answer["detail"]
        assert "nothing was changed" not in answer["detail"]
        assert r.headers["Retry-After"] == "1"
        # Cut at the deadline, not after the standby's (never-ending) wait.
        assert DEADLINE_MS / 1000 <= elapsed < DEADLINE_MS / 1000 + 1.5, (name, elapsed)
        answers[name] = elapsed
        # As the answer says: a cut connection opens the process's breaker for Retry-After.
        time.sleep(float(r.headers["Retry-After"]) + 0.2)

    # Both commits are still waiting for the standby: neither applied nor refused yet.
    assert len(primary.sync_waiters()) == 2
    item = api.get("/api/v1/work-items/a").json()
    assert (item["epoch"], item["holder"]) == (0, None)

    # The standby requirement goes (a failover, or an operator): both commits complete.
    primary.require_standby("")
    wait_for("the waiting commits to complete", lambda: not primary.sync_waiters())
    item = api.get("/api/v1/work-items/a").json()
    assert (item["epoch"], item["holder"]) == (1, "agent-1")  # it did happen: unknown, not failed
    effects = sync_stack.db(
        "SELECT count(*), min(decision) FROM core_effect WHERE idempotency_key = 'fx-b'"
    )
    assert effects == (1, "authorized")
    api.close()
    print(f"commit_unknown after {answers['acquire']:.2f} s (acquire), {answers['effect']:.2f} s")


def test_the_sdk_never_acts_on_an_unknown_commit_and_resolves_it_by_asking_again(
    sync_stack: Stack,
) -> None:
    primary: Primary = sync_stack.pg  # type: ignore[assignment]
    assert sync_stack.web is not None
    transport = Watched()
    client = Client(sync_stack.web.url, sync_stack.token, transport=transport)
    for key in ("c", "d", "e"):
        client.admit(key)
    holding_d = client.hold("d", renew=False)
    holding_e = client.hold("e", renew=False)
    primary.require_standby(NEVER)

    # The standby never comes: the effect's entry raises CommitUnknown (after asking again
    # with the same key, which met the first commit's locks), and its body never runs.
    ran: list[str | None] = []
    with pytest.raises(CommitUnknown) as unknown:
        with holding_e.effect("payment.refund", target="inv-e", idempotency_key="fx-e") as fx:
            ran.append(fx.effect_id)
    assert ran == [] and unknown.value.idempotency_key == "fx-e"
    assert unknown.value.reason == "commit_unknown"
    time.sleep(unknown.value.retry_after_s + 0.2)  # the web process's breaker, as told

    # The standby comes back between the two asks: the second returns the first answer.
    transport.on_unknown = lambda: primary.require_standby("")
    with holding_d.effect("payment.refund", target="inv-d", idempotency_key="fx-d") as fx:
        ran.append(fx.effect_id)
    assert ran == [fx.effect_id] and fx.decision is not None and fx.decision.authorized
    proposals = [s for s in transport.seen if s[1] == "/api/v1/effects"]
    assert [s[2] for s in proposals][-2:] == ["commit_unknown", 201]
    rows = sync_stack.db(
        "SELECT count(*), min(id::text) FROM core_effect WHERE idempotency_key = 'fx-d'"
    )
    assert rows == (1, fx.effect_id)  # one effect, the first proposal's
    time.sleep(1.2)  # the breaker the first proposal's cut opened has closed again

    # An acquire: the grant committed after all (the standby came back), its token never
    # arrived; the SDK asks again, meets its own lease, releases it and is granted anew.
    primary.require_standby(NEVER)
    transport.on_unknown = lambda: primary.require_standby("")
    holding_c = client.hold("c", renew=False)
    acquires = [s[2] for s in transport.seen if s[1] == "/api/v1/work-items/c/lease"]
    assert acquires == ["commit_unknown", 409, 201], transport.seen
    assert holding_c.epoch == 2
    leases = sync_stack.db(
        "SELECT array_agg(l.state ORDER BY l.epoch) FROM core_lease l "
        "JOIN core_workitem w ON w.id = l.work_item_id WHERE w.key = 'c'"
    )
    assert leases == (["released", "active"],)
    holding_c.release()
    holding_d.release()
    client.close()


class AsyncWatched(Seen, httpx.AsyncHTTPTransport):
    """`Watched` for the asyncio client."""

    # deliberate: Watched.handle_request's async twin (an await cannot be shared)
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        await response.aread()
        self.note(request, response)
        return response


def test_the_async_sdk_resolves_an_unknown_acquire_and_proposal_the_same_way(
    sync_stack: Stack,
) -> None:
    primary: Primary = sync_stack.pg  # type: ignore[assignment]
    assert sync_stack.web is not None
    url, token = sync_stack.web.url, sync_stack.token

    async def run() -> tuple[list[object], int, list[str | None], AsyncWatched]:
        transport = AsyncWatched()
        async with AsyncClient(url, token, transport=transport) as client:
            await asyncio.sleep(1.2)  # any breaker the previous test opened has closed
            await client.admit("f")
            primary.require_standby(NEVER)
            transport.on_unknown = lambda: primary.require_standby("")
            holding = await client.hold("f", renew=False)
            acquires = [s[2] for s in transport.seen if s[1] == "/api/v1/work-items/f/lease"]
            await asyncio.sleep(1.2)
            primary.require_standby(NEVER)
            transport.on_unknown = lambda: primary.require_standby("")
            ran: list[str | None] = []
            async with holding.effect("payment.refund", "inv-f", idempotency_key="fx-f") as fx:
                ran.append(fx.effect_id)
            await holding.release()
            return acquires, holding.epoch, ran, transport

    acquires, epoch, ran, transport = asyncio.run(run())
    assert acquires == ["commit_unknown", 409, 201], transport.seen
    assert epoch == 2
    proposals = [s[2] for s in transport.seen if s[1] == "/api/v1/effects"]
    assert proposals == ["commit_unknown", 201], transport.seen
    rows = sync_stack.db(
        "SELECT count(*), min(id::text) FROM core_effect WHERE idempotency_key = 'fx-f'"
    )
    assert rows == (1, ran[0])
