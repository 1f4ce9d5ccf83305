"""Effects as context managers, sync and async: proposed on entry and refused without
standing, the effect's token for the recipient, and the outcome reported on exit — applied,
failed, or unknown on cancellation and timeouts — through httpx.MockTransport.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from leaseboard_client import (
    ApprovalRequired,
    AsyncClient,
    AsyncRenewer,
    Client,
    LeaseRevoked,
    LocalJeopardy,
    Renewer,
    StaleEpoch,
    outcome_of,
)
from tests.client.fakes import FakeClock, FakeServer, offline_async_client, offline_client


def sync_client(server: FakeServer) -> Client:
    return offline_client(server, Renewer(clock=server.clock, start_thread=False))


def async_client(server: FakeServer) -> AsyncClient:
    return offline_async_client(server, AsyncRenewer(clock=server.clock, start_task=False))


def outcomes(server: FakeServer) -> list[tuple[str, Any]]:
    return [(p, b) for _, p, b in server.requests if p.endswith("/outcome")]


# -- how a body's ending becomes an outcome ------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (None, "applied"),
        (ValueError("card declined"), "failed"),
        (asyncio.CancelledError(), "unknown"),
        (KeyboardInterrupt(), "unknown"),
        (TimeoutError(), "unknown"),
        (httpx.ReadTimeout("slow"), "unknown"),
        (httpx.RemoteProtocolError("peer closed"), "unknown"),
        (httpx.ConnectError("refused"), "failed"),  # never reached the recipient
        (httpx.ConnectTimeout("refused"), "failed"),
        (httpx.PoolTimeout("no connection"), "failed"),
    ],
)
def test_how_a_body_ends_decides_the_outcome(exc: BaseException | None, outcome: str) -> None:
    assert outcome_of(exc)[0] == outcome


# -- sync ----------------------------------------------------------------------------------------


def test_a_sync_effect_proposes_hands_over_its_token_and_reports_applied(
    server: FakeServer,
) -> None:
    holding = sync_client(server).hold("job-1")
    with holding.effect(
        "payment.refund", "invoice-7", idempotency_key="refund-7", payload={"cents": 500}
    ) as fx:
        assert fx.effect_id == "e1" and fx.idempotency_key == "refund-7"
        assert fx.headers() == {
            "X-Lease-Epoch": "1",
            "X-Work-Key": "job-1",
            "X-Fencing-Token": "tok-e1",
        }
    proposal = next(b for _, p, b in server.requests if p == "/api/v1/effects")
    assert proposal == {
        "lease_id": holding.lease_id,
        "epoch": 1,
        "kind": "payment.refund",
        "target": "invoice-7",
        "idempotency_key": "refund-7",
        "payload": {"cents": 500},
    }
    assert outcomes(server) == [("/api/v1/effects/e1/outcome", {"outcome": "applied"})]
    assert fx.outcome == "applied" and fx.reported


def test_a_sync_effect_whose_body_raises_reports_failed_and_the_error_propagates(
    server: FakeServer,
) -> None:
    holding = sync_client(server).hold("job-1")
    with pytest.raises(ValueError, match="declined"):
        with holding.effect("payment.refund", "invoice-7"):
            raise ValueError("card declined")
    [(_, body)] = outcomes(server)
    assert body == {"outcome": "failed", "detail": "ValueError: card declined"}


def test_a_recipient_timeout_inside_a_sync_effect_is_reported_unknown(
    server: FakeServer,
) -> None:
    holding = sync_client(server).hold("job-1")
    with pytest.raises(httpx.ReadTimeout):
        with holding.effect("payment.refund", "invoice-7"):
            raise httpx.ReadTimeout("the payments service did not answer")
    [(_, body)] = outcomes(server)
    assert body["outcome"] == "unknown" and "may or may not" in body["detail"]


def test_set_outcome_overrides_the_guess(server: FakeServer) -> None:
    holding = sync_client(server).hold("job-1")
    with holding.effect("payment.refund", "invoice-7") as fx:
        fx.set_outcome("failed", "the recipient answered 402")
    assert outcomes(server) == [
        (
            "/api/v1/effects/e1/outcome",
            {"outcome": "failed", "detail": "the recipient answered 402"},
        )
    ]
    with pytest.raises(ValueError):
        fx.set_outcome("maybe")


def test_a_sync_effect_is_refused_in_local_jeopardy_before_any_request(
    server: FakeServer, clock: FakeClock
) -> None:
    holding = sync_client(server).hold("job-1")
    clock.now = holding.deadline
    sent = len(server.requests)
    with pytest.raises(LocalJeopardy):
        with holding.effect("payment.refund", "invoice-7"):
            pytest.fail("the body ran without standing")
    assert len(server.requests) == sent


def test_an_effect_awaiting_approval_does_not_run(server: FakeServer) -> None:
    holding = sync_client(server).hold("job-1")
    with pytest.raises(ApprovalRequired) as caught:
        with holding.effect("wire", "acct-9", idempotency_key="wire-1"):
            pytest.fail("the body ran before an approver decided")
    assert caught.value.effect_id == "e2"
    assert outcomes(server) == []  # nothing was attempted: there is no outcome to report
    assert holding.active


def test_a_stale_epoch_on_entry_ends_the_holding_and_runs_nothing(server: FakeServer) -> None:
    holding = sync_client(server).hold("job-1")
    server.fail_next.append(
        httpx.Response(409, json={"code": "stale_epoch", "current_epoch": 2, "your_epoch": 1})
    )
    with pytest.raises(StaleEpoch):
        with holding.effect("payment.refund", "invoice-7"):
            pytest.fail("the body ran under a stale epoch")
    assert isinstance(holding.lost, StaleEpoch) and outcomes(server) == []
    with pytest.raises(StaleEpoch):
        with holding.effect("payment.refund", "invoice-8"):
            pytest.fail("the body ran after the lease was lost")


def test_the_token_dies_with_the_lease_as_it_stood_when_proposed(
    server: FakeServer, clock: FakeClock
) -> None:
    client = sync_client(server)
    holding = client.hold("job-1")
    with holding.effect("payment.refund", "invoice-7") as fx:
        token_deadline = holding.deadline
        assert fx.token_deadline == token_deadline
        clock.now += 5.0
        client.renewer.tick()  # the lease lives on: a renewal moved its deadline ...
        assert holding.deadline > token_deadline and holding.active
        clock.now = token_deadline
        with pytest.raises(LocalJeopardy, match="propose the effect again"):
            fx.headers()  # ... but not this token's
        fx.set_outcome("failed", "its token expired before it was sent")
    assert outcomes(server)[0][1]["outcome"] == "failed"


def test_the_lease_token_dies_with_the_grant_when_renewals_bring_no_new_one(
    server: FakeServer, clock: FakeClock
) -> None:
    client = sync_client(server)
    holding = client.hold("job-1")
    granted_deadline = holding.deadline
    clock.now += 5.0
    server.fail_next.append(  # what the server answers: no token in a renewal
        httpx.Response(
            200,
            json={"results": [{"lease_id": holding.lease_id, "ok": True, "expires_in_ms": 15_000}]},
        )
    )
    client.renewer.tick()
    assert holding.deadline > granted_deadline and holding.fencing_token == "tok-acquire"
    clock.now = granted_deadline - 0.001
    assert holding.headers()["X-Fencing-Token"] == "tok-acquire"
    clock.now = granted_deadline
    assert holding.active  # standing is fine ...
    with pytest.raises(LocalJeopardy, match="lease token"):
        holding.headers()  # ... but the token that proved it at the grant is dead


def test_a_lost_outcome_report_never_masks_the_body(server: FakeServer) -> None:
    holding = sync_client(server).hold("job-1")
    with holding.effect("payment.refund", "invoice-7") as fx:
        server.fail_next.extend([httpx.Response(503, text="down")] * 3)
    assert fx.outcome == "applied" and not fx.reported
    assert fx.report_error is not None and fx.report_error.status == 503
    assert len(outcomes(server)) == 3  # tried three times; a human reconciles the rest


# -- async ---------------------------------------------------------------------------------------


def test_an_async_effect_reports_applied_and_failed(server: FakeServer) -> None:
    async def scenario() -> None:
        async with async_client(server) as client, client.hold("job-1") as holding:
            async with holding.effect("payment.refund", "invoice-7", idempotency_key="k7") as fx:
                assert fx.headers()["X-Fencing-Token"] == "tok-e1"
            assert fx.outcome == "applied" and fx.reported
            with pytest.raises(ValueError):
                async with holding.effect("payment.refund", "invoice-8"):
                    raise ValueError("card declined")

    asyncio.run(scenario())
    assert [b["outcome"] for _, b in outcomes(server)] == ["applied", "failed"]


def test_an_async_effect_cancelled_or_timed_out_is_reported_unknown(server: FakeServer) -> None:
    async def scenario() -> None:
        async with async_client(server) as client, client.hold("job-1") as holding:
            started = asyncio.Event()

            async def refund() -> None:
                async with holding.effect("payment.refund", "invoice-7"):
                    started.set()
                    await asyncio.sleep(3600)  # the recipient is slow

            task = asyncio.create_task(refund())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    async with holding.effect("payment.refund", "invoice-8"):
                        await asyncio.sleep(3600)

    asyncio.run(scenario())
    assert [b["outcome"] for _, b in outcomes(server)] == ["unknown", "unknown"]
    assert all("cancelled" in b["detail"] for _, b in outcomes(server))


def test_an_async_effect_is_refused_without_standing(server: FakeServer, clock: FakeClock) -> None:
    async def scenario() -> None:
        async with async_client(server) as client, client.hold("job-1") as holding:
            clock.now = holding.deadline
            sent = len(server.requests)
            with pytest.raises(LocalJeopardy):
                async with holding.effect("payment.refund", "invoice-7"):
                    pytest.fail("the body ran in local jeopardy")
            assert len(server.requests) == sent
            clock.now -= 1.0
            server.fail_next.append(httpx.Response(409, json={"code": "lease_revoked"}))
            with pytest.raises(LeaseRevoked):
                async with holding.effect("payment.refund", "invoice-7"):
                    pytest.fail("the body ran under a revoked lease")
            assert isinstance(holding.lost, LeaseRevoked)

    asyncio.run(scenario())
    assert outcomes(server) == []
