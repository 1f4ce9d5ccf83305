"""The asyncio SDK without a server: one renewer per event loop batching every holding,
local jeopardy measured from send time, transient versus authoritative failures,
cancellation, and lock delays — through httpx.MockTransport and a fake monotonic clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from leaseboard_client import (
    AsyncClient,
    AsyncHolding,
    AsyncRenewer,
    Client,
    ClientTiming,
    LeaseError,
    LocalJeopardy,
    LockDelay,
    Renewer,
    TransientError,
    Unavailable,
    WorkLeased,
)
from leaseboard_client.aio import loop_renewer
from tests.client import fakes
from tests.client.fakes import AUTHORITATIVE_REFUSALS, TIMING, FakeClock, FakeServer
from tests.client.fakes import offline_async_client as make_client
from tests.waiting import async_wait_until

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def hand_driven(clock: FakeClock) -> AsyncRenewer:
    return AsyncRenewer(clock=clock, start_task=False)


# -- holding, renewing, releasing ----------------------------------------------------------------


def test_async_with_hold_acquires_renews_in_one_batch_and_releases_on_exit(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)

    async def scenario() -> AsyncHolding:
        async with make_client(server, renewer) as client:
            async with client.hold("job-1") as holding:
                assert renewer.holdings() == [holding]
                assert holding.epoch == 1 and holding.checkpoint_data == {"step": 3}
                assert holding.active and holding.interval_s == 5.0
                clock.now += 5.0
                sent = clock.now
                assert await renewer.tick() == pytest.approx(sent + 5.0)
                assert holding.deadline == pytest.approx(sent + 15.0 * 0.99 - 1.0)
                assert holding.last_ack_sent_at == sent
            return holding

    holding = run(scenario())
    assert [p for _, p, _ in server.requests] == [
        "/api/v1/work-items/job-1/lease",
        "/api/v1/leases/renew",
        f"/api/v1/leases/{holding.lease_id}/release",
    ]
    assert renewer.holdings() == [] and renewer.requests == 1
    assert holding.released and not holding.active


def test_the_default_async_client_bounds_each_renewal_by_half_the_leases_interval(
    clock: FakeClock,
) -> None:
    server = FakeServer(clock, ttl_ms=9_000)  # the demo's payments queue: renew every 3 s
    renewer = hand_driven(clock)
    timeouts: list[tuple[str, float]] = []

    def recording(request: httpx.Request) -> httpx.Response:
        timeouts.append((request.url.path, request.extensions["timeout"]["read"]))
        return server(request)

    async def scenario() -> None:
        transport = httpx.MockTransport(recording)
        async with AsyncClient(
            "http://leaseboard.test", "t", transport=transport, clock=clock, renewer=renewer
        ) as client:
            async with client.hold("job-1") as holding:
                assert holding.request_timeout_s == 1.5
                clock.now += 3.0
                await renewer.tick()
                await holding.renew_now()

    run(scenario())
    assert [t for path, t in timeouts if "renew" in path] == [1.5, 1.5]
    assert timeouts[0][1] == 2.0 and timeouts[-1][1] == 2.0  # acquire and release


def test_an_awaited_hold_is_a_holding_and_the_deadline_counts_from_the_acquires_send_time(
    server: FakeServer, clock: FakeClock
) -> None:
    server.latency_s = 4.0  # the answer takes 4 s to come back
    sent = clock.now

    async def scenario() -> None:
        async with make_client(server, hand_driven(clock)) as client:
            holding = await client.hold("job-1")
            assert clock.now == sent + 4.0
            assert holding.deadline == pytest.approx(sent + 15.0 * 0.99 - 1.0)
            await holding.release()
            await holding.release()  # idempotent: one release request

    run(scenario())
    assert sum(p.endswith("/release") for _, p, _ in server.requests) == 1


def test_a_thousand_holdings_in_one_loop_renew_in_one_request_per_tick(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)

    async def scenario() -> list[AsyncHolding]:
        async with make_client(server, renewer) as client:
            holdings = list(await asyncio.gather(*(client.hold(f"job-{i}") for i in range(1000))))
            end = clock.now + 30.0
            while (wake := await renewer.tick()) is not None and wake <= end:
                clock.now = max(clock.now, wake)
            return holdings

    holdings = run(scenario())
    batches = [b for _, p, b in server.requests if p == "/api/v1/leases/renew"]
    # 30 s at a 5 s interval: six requests, each carrying every lease.
    assert len(batches) == renewer.requests == 6
    assert all(len(b["leases"]) == 1000 for b in batches)
    assert all(h.active and h.consecutive_failures == 0 for h in holdings)


def _in_flight_counted(
    server: FakeServer, seen: list[int], together: int
) -> httpx.AsyncBaseTransport:
    """The fake server behind an async handler that holds each batch renew until
    `together` are in flight (or 5 s have passed: one at a time, the first would wait for
    ever), recording how many were in flight as each one arrived."""
    in_flight = [0]
    all_there = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        in_flight[0] += 1
        seen.append(in_flight[0])
        if in_flight[0] >= together:
            all_there.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_there.wait(), 5.0)
        in_flight[0] -= 1
        return server(request)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(("leases", "requests", "at_once"), [(2_500, 3, 3), (7_000, 7, 4)])
def test_the_chunks_of_a_large_batch_renew_are_in_flight_together_up_to_the_cap(
    server: FakeServer, clock: FakeClock, leases: int, requests: int, at_once: int
) -> None:
    """One after another, the last of a renewer's ten chunks waited nine answers before it
    was sent (the 30,000-agent soak: 3 requests of ~64 ms a round, 225 ms at the SDK)."""
    from leaseboard_client.aio import RENEW_CHUNKS_IN_FLIGHT

    assert RENEW_CHUNKS_IN_FLIGHT == 4
    seen: list[int] = []
    ids = [(f"lease-{i}", 1) for i in range(leases)]

    async def scenario() -> list[str]:
        async with AsyncClient(
            fakes.URL,
            "t",
            timing=TIMING,
            clock=clock,
            transport=_in_flight_counted(server, seen, at_once),
        ) as client:
            return [r.lease_id for r in await client.renew_many(ids)]

    assert run(scenario()) == [lease_id for lease_id, _ in ids]  # in the leases' order
    assert server.count("/api/v1/leases/renew") == requests
    assert max(seen) == at_once


def test_a_failed_chunk_of_a_batch_renew_raises_as_it_did_in_turn(
    server: FakeServer, clock: FakeClock
) -> None:
    server.fail_next[:] = [httpx.Response(200, json={"results": []}), httpx.Response(503)]

    async def scenario() -> None:
        async with make_client(server, hand_driven(clock)) as client:
            await client.renew_many([(f"lease-{i}", 1) for i in range(2_500)])

    with pytest.raises(TransientError):
        run(scenario())
    assert server.count("/api/v1/leases/renew") == 3  # every chunk was sent


def test_a_hung_server_puts_every_holding_in_local_jeopardy_before_the_server_lets_go(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)
    lost: list[tuple[AsyncHolding, LeaseError]] = []

    def hang(request: httpx.Request) -> httpx.Response:
        clock.now += TIMING.request_timeout_s  # the request hangs until the client gives up
        raise httpx.ReadTimeout("no answer", request=request)

    async def scenario() -> list[AsyncHolding]:
        async with make_client(server, renewer) as client:
            holdings = list(
                await asyncio.gather(
                    *(
                        client.hold(f"job-{i}", on_lost=lambda h, e: lost.append((h, e)))
                        for i in range(1000)
                    )
                )
            )
            clock.now += 5.0
            await renewer.tick()  # healthy: everything renewed
            last_ack = clock.now
            server.fail_next.extend([hang] * 100)  # type: ignore[list-item]
            detected = None
            while detected is None:
                clock.now += 0.5
                await renewer.tick()
                if any(h.in_jeopardy for h in holdings):
                    detected = clock.now
            # Every holding fell into jeopardy in the same instant, at the deadline measured
            # from the send time of the last acknowledged renewal, before the server's expiry.
            assert all(h.in_jeopardy and h.lost is None for h in holdings)
            assert all(h.last_ack_sent_at == last_ack for h in holdings)
            for h in holdings:
                assert h.deadline == pytest.approx(last_ack + 15.0 * 0.99 - 1.0)
                assert h.deadline < server.expires_at[h.lease_id]
                assert isinstance(h.last_error, TransientError) and h.consecutive_failures > 1
            assert detected < min(server.expires_at.values())
            sent = len(server.requests)
            for h in holdings[:10]:
                with pytest.raises(LocalJeopardy):
                    await h.propose("charge", "acct-9")
                with pytest.raises(LocalJeopardy):
                    async with h.effect("charge", "acct-9"):
                        pytest.fail("an effect ran in local jeopardy")
            assert len(server.requests) == sent  # refused before any request
            return holdings

    run(scenario())
    assert lost == []  # transient failures never abdicate; jeopardy is not loss


@pytest.mark.parametrize(("code", "error"), AUTHORITATIVE_REFUSALS)
def test_an_authoritative_refusal_ends_an_async_holding_at_once_and_a_transient_one_does_not(
    server: FakeServer, clock: FakeClock, code: str, error: type
) -> None:
    renewer = hand_driven(clock)
    lost: list[tuple[AsyncHolding, LeaseError]] = []

    async def scenario() -> None:
        async with make_client(server, renewer) as client:
            holding = await client.hold("job-1", on_lost=lambda h, e: lost.append((h, e)))
            other = await client.hold("job-2")
            clock.now += 5.0
            server.fail_next.append(httpx.Response(503, text="restarting"))
            await renewer.tick()
            assert holding.active and holding.consecutive_failures == 1 and not lost
            server.lease_codes[holding.lease_id] = code
            clock.now = holding.next_renew_at
            await renewer.tick()
            assert len(lost) == 1 and lost[0][0] is holding and isinstance(lost[0][1], error)
            assert isinstance(holding.lost, error) and holding.remaining_s() > 5
            assert renewer.holdings() == [other] and other.active
            sent = len(server.requests)
            with pytest.raises(error):
                await holding.propose("charge", "acct-9")
            with pytest.raises(error):
                holding.headers()
            with pytest.raises(error):
                await holding.checkpoint({"step": 1})
            await holding.release()  # the lease is gone: nothing to release
            assert len(server.requests) == sent

    run(scenario())


# -- one renewer task per loop, and cancellation -------------------------------------------------


def test_the_loop_renewer_task_renews_by_itself_and_ends_when_nothing_is_held() -> None:
    clock = FakeClock()
    server = FakeServer(clock, ttl_ms=900)
    server.renew_after_ms = 200

    async def scenario() -> None:
        seen = asyncio.Event()

        def handler(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/api/v1/leases/renew":
                seen.set()
            return server(request)

        timing = ClientTiming(request_timeout_s=0.1, renew_interval_s=0.2, safety_margin_s=0.1)
        async with AsyncClient(
            "http://leaseboard.test",
            "t",
            timing=timing,
            transport=httpx.MockTransport(handler),
        ) as client:
            assert client.renewer is loop_renewer() and not loop_renewer().running
            async with client.hold("job-1"), client.hold("job-2"):
                assert loop_renewer().running
                await asyncio.wait_for(seen.wait(), 5)
            for _ in range(3):
                await asyncio.sleep(0)
            assert not loop_renewer().running and loop_renewer().holdings() == []

    run(scenario())
    batches = [b for _, p, b in server.requests if p == "/api/v1/leases/renew"]
    assert batches and len(batches[0]["leases"]) == 2


def test_each_event_loop_has_its_own_renewer() -> None:
    async def mine() -> AsyncRenewer:
        return loop_renewer()

    first, second = run(mine()), run(mine())
    assert first is not second


def test_a_task_cancelled_while_holding_stops_renewing_and_releases(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)

    async def scenario() -> AsyncHolding:
        entered = asyncio.Event()
        holder: list[AsyncHolding] = []

        async def work(client: AsyncClient) -> None:
            async with client.hold("job-1") as holding:
                holder.append(holding)
                entered.set()
                await asyncio.sleep(3600)

        async with make_client(server, renewer) as client:
            task = asyncio.create_task(work(client))
            await entered.wait()
            assert renewer.holdings() == holder
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return holder[0]

    holding = run(scenario())
    assert renewer.holdings() == [] and holding.released
    assert server.requests[-1][1] == f"/api/v1/leases/{holding.lease_id}/release"


def test_a_second_cancellation_does_not_stop_the_release(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)

    async def slow_release(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.05)
        return httpx.Response(200, json={})

    async def scenario() -> tuple[AsyncHolding, list[str]]:
        async with make_client(server, renewer) as client:
            holding = await client.hold("job-1")
            server.fail_next.append(slow_release)  # type: ignore[arg-type]
            task = asyncio.create_task(holding.release())
            await async_wait_until(  # the release is on the wire
                lambda: server.requests[-1][1].endswith("/release"), what="the release sent"
            )
            assert renewer.holdings() == []  # left the renewer before anything was awaited
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The shielded release finishes on its own.
            await async_wait_until(lambda: holding.released, what="the release finished")
            return holding, [p for _, p, _ in server.requests]

    holding, paths = run(scenario())
    assert paths[-1] == f"/api/v1/leases/{holding.lease_id}/release"
    assert holding.released


def test_a_cancelled_acquire_leaves_nothing_registered(
    server: FakeServer, clock: FakeClock
) -> None:
    async def hung(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def scenario() -> AsyncRenewer:
        renewer = loop_renewer()
        async with make_client(server, None) as client:
            server.fail_next.append(hung)  # type: ignore[arg-type]
            task = asyncio.create_task(client.hold("job-1").__aenter__())
            await async_wait_until(lambda: server.requests, what="the acquire sent")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return renewer

    renewer = run(scenario())
    # Whatever the server granted expires by itself; nothing in this process renews it.
    assert renewer.holdings() == [] and not renewer.running


# -- lock delays ---------------------------------------------------------------------------------


def lock_delay(retry_after_ms: int) -> httpx.Response:
    return httpx.Response(
        409, json={"code": "lock_delay", "detail": "fenced", "retry_after_ms": retry_after_ms}
    )


def test_hold_waits_out_a_lock_delay_within_its_budget_sync_and_async(
    server: FakeServer, clock: FakeClock
) -> None:
    server.fail_next.append(lock_delay(30))
    sync = Client(
        "http://leaseboard.test",
        "t",
        timing=TIMING,
        transport=httpx.MockTransport(server),
        clock=clock,
        renewer=Renewer(clock=clock, start_thread=False),
    )
    with sync.hold("job-1", wait_s=1.0) as holding:
        assert holding.epoch == 1
    server.fail_next.append(lock_delay(30))

    async def scenario() -> None:
        async with make_client(server, hand_driven(clock)) as client:
            async with client.hold("job-2", wait_s=1.0) as holding:
                assert holding.epoch == 1

    run(scenario())
    acquires = [p for _, p, _ in server.requests if p.endswith("/lease")]
    assert (
        acquires == ["/api/v1/work-items/job-1/lease"] * 2 + ["/api/v1/work-items/job-2/lease"] * 2
    )


def test_a_lock_delay_past_the_budget_is_raised_with_its_retry_after(
    server: FakeServer, clock: FakeClock
) -> None:
    server.fail_next.append(lock_delay(4_000))

    async def scenario() -> None:
        async with make_client(server, hand_driven(clock)) as client:
            with pytest.raises(LockDelay) as caught:
                await client.hold("job-1", wait_s=1.0)
            assert caught.value.retry_after_s == 4.0

    run(scenario())
    assert sum(p.endswith("/lease") for _, p, _ in server.requests) == 1


# -- memory ----------------------------------------------------------------------------------------


def test_every_answer_is_freed_when_its_call_returns_not_left_to_the_garbage_collector(
    server: FakeServer, clock: FakeClock
) -> None:
    """httpx 0.28 ties each response to its stream in a reference cycle. The SDK cuts it
    once the answer is read: with the cyclic collector off, no answer outlives its call
    (sync and async, granted, renewed in a batch, refused, released). Left to the
    collector, dead batch renew answers piled up between its full collections: the soak's
    agent processes grew by megabytes (bench/soak_memprobe.py)."""
    answers: list[weakref.ref[httpx.Response]] = []

    def recorded(request: httpx.Request) -> httpx.Response:
        response = server(request)
        answers.append(weakref.ref(response))
        return response

    def client_args() -> dict[str, Any]:
        transport = httpx.MockTransport(recorded)
        return {"timing": TIMING, "transport": transport, "clock": clock}

    refused = {"code": "work_leased", "title": "Leased to another agent"}
    renewer = Renewer(clock=clock, start_thread=False)
    async_renewer = hand_driven(clock)

    async def scenario() -> None:
        async with AsyncClient("http://lb.test", "t", renewer=async_renewer, **client_args()) as c:
            holdings = [await c.hold(f"job-a{i}") for i in range(3)]
            clock.now += 5.0
            await async_renewer.tick()
            async with holdings[0].effect("payment.refund", target="invoice-7"):
                pass
            server.fail_next.append(httpx.Response(409, json=refused))
            with pytest.raises(WorkLeased):
                await c.acquire("job-a0")
            for holding in holdings:
                await holding.release()

    gc.collect()
    gc.disable()
    try:
        with Client("http://lb.test", "t", renewer=renewer, **client_args()) as sync:
            holdings = [sync.hold(f"job-s{i}") for i in range(3)]
            clock.now += 5.0
            renewer.tick()
            with holdings[0].effect("payment.refund", target="invoice-7"):
                pass
            server.fail_next.append(httpx.Response(409, json=refused))
            with pytest.raises(WorkLeased):
                sync.acquire("job-s0")
            for holding in holdings:
                holding.release()
        run(scenario())
        alive = sum(answer() is not None for answer in answers)
    finally:
        gc.enable()
    assert server.count("/api/v1/leases/renew") == 2 and len(answers) == 20
    assert alive == 0


def test_an_async_holding_through_a_503_outage_within_its_ttl_is_jeopardy_not_loss_and_resumes(
    server: FakeServer, clock: FakeClock
) -> None:
    renewer = hand_driven(clock)
    lost: list[LeaseError] = []
    down = httpx.Response(
        503, json={"code": "unavailable", "reason": "deadline"}, headers={"Retry-After": "1"}
    )

    async def scenario() -> None:
        async with make_client(server, renewer) as client:
            holding = await client.hold("job-1", on_lost=lambda h, e: lost.append(e))
            deadline = holding.deadline
            server.fail_next.extend([down] * 100)
            # Past the local deadline, short of the ttl after which the lease is certainly
            # gone (tests/client/test_unit.py has the outage that outlasts it).
            while clock.now < deadline + 1:
                clock.now += 0.5
                await renewer.tick()
            assert holding.in_jeopardy and holding.lost is None and not lost
            assert isinstance(holding.last_error, Unavailable)
            with pytest.raises(LocalJeopardy):
                await holding.propose("charge", "acct-9")
            server.fail_next.clear()
            clock.now = holding.next_renew_at
            await renewer.tick()
            assert holding.active and holding.consecutive_failures == 0
            await holding.release()

    run(scenario())
    assert lost == []


def test_an_async_hold_after_a_timed_out_acquire_releases_its_own_unseen_grant(
    server: FakeServer, clock: FakeClock
) -> None:
    granted: list[tuple[str, int]] = []
    lost_answer = fakes.granted_then_lost(server, granted)
    server.fail_next.extend([lost_answer, fakes.own_lease_in_the_way(granted)])

    async def scenario() -> None:
        async with make_client(server, hand_driven(clock)) as client:
            holding = await client.hold("job-1")
            assert holding.active and holding.lease_id != granted[0][0]
            await holding.release()

    run(scenario())
    paths = [p for _, p, _ in server.requests]
    assert paths[:4] == [
        "/api/v1/work-items/job-1/lease",
        "/api/v1/work-items/job-1/lease",
        f"/api/v1/leases/{granted[0][0]}/release",
        "/api/v1/work-items/job-1/lease",
    ]
