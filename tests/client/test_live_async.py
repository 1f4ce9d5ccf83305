"""The asyncio SDK against a real running Leaseboard, through the same proxy and lockstep
clock as the sync client's live tests (tests/client/harness.py).

Each test runs its event loop with `asyncio.run`; the database is read in a worker thread
(`in_thread`), because Django refuses synchronous queries from inside an event loop.
"""

from __future__ import annotations

import asyncio

import pytest

from leaseboard_client import (
    AsyncHolding,
    ClientTiming,
    LeaseRevoked,
    LocalJeopardy,
    StaleEpoch,
    TransientError,
)
from tests.builders import admit
from tests.client.harness import (
    TIMING,
    TTL_MS,
    Live,
    an_approver,
    in_thread,
    lease_row,
    lost_recorder,
    take_over,
)

pytestmark = pytest.mark.postgres

# -- 1,000 holdings in one event loop -------------------------------------------------------------

MANY = 1000
MANY_TTL_MS = 90_000  # renew_after 30 s: the acquisitions all fall in one coalescing window
MANY_TIMING = ClientTiming(request_timeout_s=4.0, renew_interval_s=30.0, safety_margin_s=3.0)


def live_leases(lease_ids: list[str]) -> int:
    """How many of these leases the server still counts as live, by its own clock."""
    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease

    return Lease.objects.filter(
        id__in=lease_ids, state__in=("active", "jeopardy"), expires_at_ms__gt=db_now_ms()
    ).count()


@pytest.mark.slow
def test_a_thousand_holdings_in_one_loop_renew_in_one_request_per_tick_and_a_hung_server_puts_every_one_in_jeopardy_first(  # noqa: E501
    live: Live,
    settings,  # type: ignore[no-untyped-def]
) -> None:
    # One credential acquiring a thousand leases in seconds is over the default 600/m.
    settings.LEASEBOARD_RATE_LIMIT_ENABLED = False
    keys = [f"many-{n}" for n in range(MANY)]
    for key in keys:
        admit(key, ttl_ms=MANY_TTL_MS)
    renewer = live.async_renewer()

    async def scenario() -> None:
        async with live.async_client(renewer, timing=MANY_TIMING) as client:
            gate = asyncio.Semaphore(8)  # the live server is one process on two cores

            async def hold(key: str) -> AsyncHolding:
                async with gate:
                    return await client.hold(key)

            holdings = await asyncio.gather(*(hold(key) for key in keys))
            lease_ids = [h.lease_id for h in holdings]
            assert len(set(lease_ids)) == MANY and len(renewer.holdings()) == MANY

            # Healthy: each tick is one batch renew request carrying every lease.
            for tick in range(1, 4):
                live.clock.skip(30.0)
                await renewer.tick()
                renewals = live.proxy.renewals()
                assert [s.path for s in renewals] == ["/api/v1/leases/renew"] * tick
                assert {i["lease_id"] for i in renewals[-1].body["leases"]} == set(lease_ids)
                assert renewer.requests == tick
                assert all(h.consecutive_failures == 0 and h.active for h in holdings)
            last_ack = holdings[0].last_ack_sent_at
            assert all(h.last_ack_sent_at == last_ack for h in holdings)

            # The server hangs: the next renewal is read and never answered.
            live.proxy.hang_renewals = True
            live.clock.skip(30.0)
            await renewer.tick()
            assert [s.action for s in live.proxy.renewals()][-1] == "hung"
            # One transient failure is not abdication: every holding still acts.
            assert all(h.consecutive_failures == 1 and h.active for h in holdings)
            assert all(isinstance(h.last_error, TransientError) for h in holdings)

            # Up to the local deadline, measured from the send time of the last acknowledged
            # renewal: then every holding is in local jeopardy at once ...
            deadline = max(h.deadline for h in holdings)
            assert deadline == pytest.approx(
                last_ack + MANY_TTL_MS / 1000 * 0.99 - MANY_TIMING.safety_margin_s, abs=1e-6
            )
            live.clock.skip(deadline - live.clock() + 0.01)
            assert all(h.in_jeopardy and h.lost is None for h in holdings)
            for h in holdings:
                with pytest.raises(LocalJeopardy):
                    h.ensure()
            # ... while the server still gives every one of them standing.
            assert await in_thread(live_leases, lease_ids) == MANY
            # Effects are refused locally, before any request leaves the process.
            with pytest.raises(LocalJeopardy):
                async with holdings[0].effect("payment.refund", "invoice-1"):
                    pytest.fail("an effect ran in local jeopardy")
            assert live.proxy.requests_to("/api/v1/effects") == []

            # The server lets go only later, when the ttl has run out by its own clock.
            live.clock.skip(MANY_TIMING.safety_margin_s + 1.0)
            assert await in_thread(live_leases, lease_ids) == 0
            live.proxy.hang_renewals = False

    asyncio.run(scenario())


# -- a blip, a takeover, effects and cancellation against the live server --------------------------


def test_an_async_holding_survives_one_503_and_its_effects_are_recorded_with_outcomes(
    live: Live,
) -> None:
    key = live.admitted("async-blip")
    renewer = live.async_renewer()

    async def scenario() -> str:
        async with live.async_client(renewer) as client, client.hold(key) as holding:
            deadline = holding.deadline
            live.proxy.fail_renewals = 1
            live.clock.skip(1.0)
            await renewer.tick()
            assert holding.active and holding.consecutive_failures == 1
            assert holding.deadline == deadline and holding.last_error.status == 503
            live.clock.skip(TIMING.retry_s)
            await renewer.tick()
            assert holding.consecutive_failures == 0 and holding.deadline > deadline
            assert [s.action for s in live.proxy.renewals()] == ["503", "forwarded"]

            async with holding.effect("payment.capture", "invoice-1", idempotency_key="a1") as fx:
                headers = fx.headers()
                assert headers["X-Lease-Epoch"] == str(holding.epoch)
                assert headers["X-Fencing-Token"] == fx.fencing_token
            with pytest.raises(RuntimeError):
                async with holding.effect("payment.capture", "invoice-2"):
                    raise RuntimeError("the payments service said no")
            assert await holding.checkpoint({"step": 2}) >= 1
            return holding.lease_id

    lease_id = asyncio.run(scenario())
    from leaseboard.core.models import Effect

    effects = Effect.objects.filter(lease_id=lease_id).order_by("target")
    assert [(e.target, e.decision, e.outcome) for e in effects] == [
        ("invoice-1", "authorized", "applied"),
        ("invoice-2", "authorized", "failed"),
    ]
    assert lease_row(lease_id).state == "released"
    assert live.server_view(key)["lease_id"] is None


def test_a_takeover_stops_an_async_holding_and_its_late_effect_is_refused_and_recorded(
    live: Live,
    agent,  # type: ignore[no-untyped-def]
) -> None:
    key = live.admitted("async-takeover")
    successor, _ = agent("async-successor")
    approver = an_approver()
    renewer = live.async_renewer()
    lost, on_lost = lost_recorder()

    async def scenario() -> str:
        async with live.async_client(renewer) as client:
            async with client.hold(key, on_lost=on_lost) as holding:
                await in_thread(take_over, key, holding.lease_id, successor, approver)
                assert holding.active  # nothing has told this process yet
                with pytest.raises(StaleEpoch):
                    async with holding.effect("payment.capture", "invoice-late"):
                        pytest.fail("the body ran under a revoked lease")
                assert isinstance(holding.lost, StaleEpoch) and renewer.holdings() == []
                with pytest.raises(StaleEpoch):
                    holding.headers()
            second = live.admitted("async-revoked")
            async with client.hold(second, on_lost=on_lost) as other:
                await in_thread(take_over, second, other.lease_id, successor, approver)
                live.clock.skip(1.0)
                await renewer.tick()  # the renewal learns it first
                assert isinstance(other.lost, LeaseRevoked) and other.remaining_s() > 0.3
            return holding.lease_id

    lease_id = asyncio.run(scenario())
    assert [e.code for _, e in lost] == ["stale_epoch", "lease_revoked"]
    from leaseboard.core.models import Effect

    refused = Effect.objects.get(lease_id=lease_id, target="invoice-late")
    assert (refused.decision, refused.refusal_code) == ("refused", "stale_epoch")
    assert live.proxy.requests_to(f"/api/v1/leases/{lease_id}/release") == []
    assert live.server_view(key)["holder"] == "async-successor"


def test_a_cancelled_task_releases_its_lease_on_the_server_and_leaves_no_renewer(
    live: Live,
) -> None:
    key = live.admitted("async-cancel", ttl_ms=TTL_MS)
    renewer = live.async_renewer()

    async def scenario() -> tuple[str, str]:
        async with live.async_client(renewer) as client:
            entered = asyncio.Event()
            seen: list[AsyncHolding] = []

            async def agent_task() -> None:
                async with client.hold(key) as holding:
                    seen.append(holding)
                    async with holding.effect("payment.capture", "invoice-9"):
                        entered.set()
                        await asyncio.sleep(3600)  # stuck on a slow recipient

            task = asyncio.create_task(agent_task())
            await entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert renewer.holdings() == []
            return seen[0].lease_id, (await client.work_item(key))["status"]

    lease_id, _status = asyncio.run(scenario())
    from leaseboard.core.models import Effect

    assert Effect.objects.get(lease_id=lease_id).outcome == "unknown"
    assert lease_row(lease_id).state == "released"
    assert live.proxy.requests_to(f"/api/v1/leases/{lease_id}/release") != []
