"""The agent SDK against a real running Leaseboard (pytest-django's live server, real HTTP).

Between the SDK and the live server sits a tiny loopback HTTP proxy that can make renewals
hang (it reads the request and never answers) or answer exactly one renewal with a real
HTTP 503; everything else it forwards unchanged (tests/client/harness.py). The renewer is
driven by hand (`Renewer(start_thread=False).tick()`), and time is moved in lockstep on
both sides: the SDK's monotonic clock and the database clock seam (docs/design.md §3) skip by the
same amount, on top of real time, so nothing waits out a ttl for real. The asyncio client
meets the same server in test_live_async.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from leaseboard_client import (
    Client,
    LeaseExpired,
    LeaseRevoked,
    LocalJeopardy,
    StaleEpoch,
    TransientError,
    process_renewer,
)
from tests.client.harness import (
    TIMING,
    TTL_MS,
    Live,
    an_approver,
    lease_row,
    lost_recorder,
    take_over,
)

pytestmark = pytest.mark.postgres


# -- 1. hung renewals: local jeopardy before the server expires the lease ------------------


def test_hung_renewals_put_the_sdk_in_jeopardy_before_the_server_expires_the_lease(
    live: Live,
) -> None:
    client = live.client()
    key = live.admitted("hang")
    lost, on_lost = lost_recorder()
    holding = client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost)
    assert holding.ttl_ms == TTL_MS and holding.interval_s == 1.0

    # Healthy first: a renewal goes through the proxy to the server and moves the deadline.
    first_deadline = holding.deadline
    live.clock.skip(1.0)
    live.renewer.tick()
    assert [s.action for s in live.proxy.renewals()] == ["forwarded"]
    assert holding.deadline > first_deadline and holding.consecutive_failures == 0

    # Now every renewal hangs: the proxy reads it and never answers.
    live.proxy.hang_renewals = True
    hang_started = live.clock()
    last_ack_sent_at = holding.last_ack_sent_at
    view: dict[str, Any] | None = None
    for _ in range(400):
        try:
            holding.ensure()
        except LocalJeopardy:
            # The very moment guarded calls start refusing: ask the server directly.
            detected_at = live.clock()
            view = live.server_view(key)
            break
        live.renewer.tick()
        live.clock.skip(0.05)
    assert view is not None, "the SDK never entered local jeopardy"

    # The server still gives this holder standing: the SDK stopped itself early.
    assert view["lease_id"] == holding.lease_id
    assert view["certainty"] in ("active", "jeopardy"), view
    assert view["expires_in_ms"] > 0, view
    # Seen from the local deadline itself (this loop notices it up to one hung request late),
    # the server had about the safety margin left.
    server_left_at_deadline = view["expires_in_ms"] / 1000 + (detected_at - holding.deadline)
    assert server_left_at_deadline > TIMING.safety_margin_s / 2, server_left_at_deadline
    # Jeopardy was measured from when the last acknowledged renewal was SENT.
    assert holding.last_ack_sent_at == last_ack_sent_at
    assert detected_at >= holding.deadline
    assert holding.deadline == pytest.approx(
        last_ack_sent_at + TTL_MS / 1000 * (1 - TIMING.drift_rate) - TIMING.safety_margin_s,
        abs=0.5,
    )

    # The renewals really hung and timed out; transient failures did not end the holding.
    hung = live.proxy.renewals("hung")
    assert len(hung) >= 2
    assert isinstance(holding.last_error, TransientError)
    assert holding.last_error.code == "timeout"
    assert holding.consecutive_failures == len(hung)
    assert holding.lost is None and not lost
    assert not holding.active and holding.in_jeopardy

    # Every guarded call refuses locally, before any request leaves the process.
    with pytest.raises(LocalJeopardy):
        holding.propose("payment.capture", "invoice-1")
    with pytest.raises(LocalJeopardy):
        holding.headers()
    with pytest.raises(LocalJeopardy), holding.guard():
        pytest.fail("guarded block ran in jeopardy")
    assert live.proxy.requests_to("/api/v1/effects") == []

    # Keep the renewals hung for longer than the ttl: the server lets the lease go, and the
    # SDK keeps refusing all the while.
    for _ in range(400):
        if live.server_view(key)["lease_id"] is None:
            break
        live.renewer.tick()
        live.clock.skip(0.1)
        with pytest.raises(LocalJeopardy):
            holding.ensure()
    assert live.server_view(key)["certainty"] is None
    assert live.clock() - hang_started > TTL_MS / 1000

    # When the network heals, the next renewal learns the authoritative answer.
    live.proxy.hang_renewals = False
    live.clock.skip(0.3)
    live.renewer.tick()
    assert isinstance(holding.lost, LeaseExpired)
    assert [(h, e.code) for h, e in lost] == [(holding, "lease_expired")]
    assert live.renewer.holdings() == []
    with pytest.raises(LeaseExpired):
        holding.propose("payment.capture", "invoice-1")
    holding.release()  # already lost: no release request
    assert live.proxy.requests_to(f"/api/v1/leases/{holding.lease_id}/release") == []


# -- 2. one 503 does not end the lease ---------------------------------------------------------


def test_one_503_on_a_renewal_does_not_end_the_lease(live: Live) -> None:
    client = live.client()
    key = live.admitted("blip")
    lost, on_lost = lost_recorder()
    with client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost) as holding:
        row = lease_row(holding.lease_id)
        deadline_at_grant = holding.deadline
        live.proxy.fail_renewals = 1

        live.clock.skip(1.0)
        live.renewer.tick()
        failed = live.proxy.renewals("503")
        assert len(failed) == 1 and failed[0].body["leases"][0]["lease_id"] == holding.lease_id
        assert isinstance(holding.last_error, TransientError)
        assert holding.last_error.status == 503
        assert holding.consecutive_failures == 1
        assert holding.lost is None and holding.active and not lost
        assert holding.deadline == deadline_at_grant  # the failure neither moves nor cuts it
        assert lease_row(holding.lease_id).renew_count == row.renew_count  # never reached it

        # The retry comes soon (retry_s), goes through to the server and renews.
        live.clock.skip(TIMING.retry_s)
        live.renewer.tick()
        assert [s.action for s in live.proxy.renewals()] == ["503", "forwarded"]
        assert holding.consecutive_failures == 0 and holding.last_error is None
        assert holding.deadline > deadline_at_grant
        assert lease_row(holding.lease_id).renew_count == row.renew_count + 1
        view = live.server_view(key)
        assert view["lease_id"] == holding.lease_id and view["certainty"] == "active"
        assert view["expires_in_ms"] > TTL_MS - 1000

        # Guarded calls work: the server authorizes an effect under this epoch.
        assert holding.active
        decision = holding.propose("payment.capture", "invoice-2")
        assert decision.authorized and decision.fencing_token
        headers = holding.headers(decision)
        assert headers["X-Lease-Epoch"] == str(holding.epoch)
        assert headers["X-Fencing-Token"] == decision.fencing_token
        assert holding.checkpoint({"step": 1}) >= 1
    assert not lost
    # Leaving the block released the lease on the server.
    assert live.server_view(key)["lease_id"] is None
    assert lease_row(holding.lease_id).state == "released"


# -- 3. lease_revoked stops it at once ---------------------------------------------------------


@contextmanager
def _holding(live: Live, name: str) -> Iterator[tuple[Client, str, Any, list]]:
    """(client, key, holding, lost): a fresh client holding a newly admitted work item for
    the block, every loss it reports recorded in `lost`."""
    client = live.client()
    key = live.admitted(name)
    lost, on_lost = lost_recorder()
    with client.hold(key, ttl_ms=TTL_MS, on_lost=on_lost) as holding:
        yield client, key, holding, lost


@pytest.fixture
def successor_takes_over(agent) -> Callable[[str, str], int]:  # type: ignore[no-untyped-def]
    """take(key, lease_id) -> the new epoch: an approver revokes the lease and grants the
    work to the agent "successor" (both made before the hold starts)."""
    successor, _ = agent("successor")
    approver = an_approver()
    return lambda key, lease_id: take_over(key, lease_id, successor, approver)


def test_lease_revoked_on_renew_ends_the_holding_at_once(
    live: Live, successor_takes_over: Callable[[str, str], int]
) -> None:
    with _holding(live, "revoke") as (client, key, holding, lost):
        old_epoch = holding.epoch
        new_epoch = successor_takes_over(key, holding.lease_id)
        assert new_epoch == old_epoch + 1
        assert live.server_view(key)["holder"] == "successor"

        live.clock.skip(1.0)
        live.renewer.tick()
        assert len(live.proxy.renewals("forwarded")) == 1

        # Lost on the first answer: no retry, no waiting for the local deadline.
        assert isinstance(holding.lost, LeaseRevoked)
        assert holding.lost.code == "lease_revoked"
        assert [(h, e.code) for h, e in lost] == [(holding, "lease_revoked")]
        assert holding.remaining_s() > 0.3  # long before the local deadline
        assert not holding.active
        assert live.renewer.holdings() == []
        with pytest.raises(LeaseRevoked):
            holding.ensure()
        with pytest.raises(LeaseRevoked):
            holding.propose("payment.capture", "invoice-3")
        with pytest.raises(LeaseRevoked):
            holding.headers()
        with pytest.raises(LeaseRevoked):
            holding.checkpoint({"step": 2})
        assert live.proxy.requests_to("/api/v1/effects") == []

        # An effect proposed with the old epoch anyway is refused by the server.
        with pytest.raises(StaleEpoch) as refused:
            client.propose_effect(holding.lease_id, old_epoch, "payment.capture", "invoice-3")
        assert refused.value.your_epoch == old_epoch
        assert refused.value.current_epoch == new_epoch

        # The renewer forgot the lease: later ticks send nothing.
        live.clock.skip(1.0)
        assert live.renewer.tick() is None
        assert len(live.proxy.renewals()) == 1
    # Leaving the block sends no release for a lost lease; the successor keeps the work.
    assert live.proxy.requests_to(f"/api/v1/leases/{holding.lease_id}/release") == []
    assert live.server_view(key)["holder"] == "successor"
    assert len(lost) == 1


def test_after_a_takeover_an_old_epoch_effect_is_refused_before_any_renewal(
    live: Live, successor_takes_over: Callable[[str, str], int]
) -> None:
    with _holding(live, "takeover") as (_, key, holding, lost):
        successor_takes_over(key, holding.lease_id)
        assert holding.active  # nothing has told this process yet

        with pytest.raises(StaleEpoch):
            holding.propose("payment.capture", "invoice-4")
        assert isinstance(holding.lost, StaleEpoch)
        assert [(h, e.code) for h, e in lost] == [(holding, "stale_epoch")]
        with pytest.raises(StaleEpoch):
            holding.headers()
        assert live.renewer.holdings() == []
    assert live.proxy.renewals() == []


# -- 4. one renewer per process, one batch request per tick ---------------------------------


def test_two_holdings_in_one_process_renew_in_one_request_per_tick(live: Live) -> None:
    client = live.client()
    keys = [live.admitted("batch") for _ in range(2)]
    first = client.hold(keys[0], ttl_ms=TTL_MS)
    second = client.hold(keys[1], ttl_ms=TTL_MS)
    with first, second:
        lease_ids = {first.lease_id, second.lease_id}
        assert {h.lease_id for h in live.renewer.holdings()} == lease_ids
        counts = {lid: lease_row(lid).renew_count for lid in lease_ids}
        for tick in range(1, 4):
            live.clock.skip(1.0)
            live.renewer.tick()
            renewals = live.proxy.renewals()
            assert len(renewals) == tick
            assert all(s.path == "/api/v1/leases/renew" for s in renewals)
            assert {item["lease_id"] for item in renewals[-1].body["leases"]} == lease_ids
            assert live.renewer.requests == tick
        assert {lid: lease_row(lid).renew_count for lid in lease_ids} == {
            lid: n + 3 for lid, n in counts.items()
        }
        assert first.active and second.active
        assert first.consecutive_failures == second.consecutive_failures == 0
        for key, holding in zip(keys, (first, second), strict=True):
            view = live.server_view(key)
            assert view["lease_id"] == holding.lease_id and view["certainty"] == "active"

    # Clients built without an explicit renewer share the one process-wide renewer.
    plain = [Client(live.proxy.url, live.token, timing=TIMING) for _ in range(2)]
    live.clients.extend(plain)
    assert plain[0].renewer is plain[1].renewer is process_renewer()


# -- waiting for an approver keeps the lease (issue 28, point 2) -----------------------------


def test_an_effect_waiting_for_approval_keeps_renewing_until_an_approver_decides(
    live: Live,
) -> None:
    import threading

    from leaseboard.core.models import Effect, Queue
    from leaseboard.core.services.approvals import effect_approve
    from tests.builders import effect_rules

    effect_rules(Queue.objects.get(name="default"), ("payment.refund", "require_approval"))
    approver = an_approver()
    client = live.client()
    key = live.admitted("approval")
    seen: dict[str, Any] = {}
    with client.hold(key, ttl_ms=TTL_MS) as holding:
        renewals_before = lease_row(holding.lease_id).renew_count

        def wait_for_it() -> None:
            try:
                with holding.effect(
                    "payment.refund", "order-1", approval_wait_s=120, approval_poll_s=0.05
                ) as fx:
                    seen["decision"] = fx.decision.decision if fx.decision else None
                    seen["token"] = fx.fencing_token
            except Exception as exc:  # surfaced by the assertions below
                seen["error"] = exc

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        # Three ttls pass while the approver thinks; the renewer keeps the lease all along.
        for _ in range(3 * TTL_MS // 1000):
            live.clock.skip(1.0)
            live.renewer.tick()
            assert live.server_view(key)["certainty"] == "active"
        assert waiter.is_alive(), seen
        effect = Effect.objects.get(work_item__key=key)
        assert effect.decision == "pending_approval"
        effect_approve(effect_id=effect.id, actor=approver, note="fine")
        waiter.join(10)
        assert not waiter.is_alive()
        assert seen.get("decision") == "authorized", seen
        assert seen["token"]
        lease = lease_row(holding.lease_id)
        assert lease.state == "active" and lease.renew_count >= renewals_before + 3
        assert Effect.objects.filter(id=effect.id, outcome="applied").exists()
