"""SDK logic that needs no Leaseboard server: timing validation, the local deadline measured
from send time, error mapping, and the batching renewer, driven through httpx.MockTransport
and a fake monotonic clock.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from leaseboard_client import (
    Client,
    ClientTiming,
    Holding,
    InJeopardy,
    InternalError,
    LeaseError,
    LeaseLost,
    LocalJeopardy,
    NotHolder,
    OnHold,
    Renewer,
    StaleEpoch,
    TimingError,
    TransientError,
    Unavailable,
    WorkLeased,
    local_deadline,
)
from tests.client.fakes import (
    AUTHORITATIVE_REFUSALS,
    TIMING,
    FakeClock,
    FakeServer,
    granted_then_lost,
    own_lease_in_the_way,
)
from tests.client.fakes import offline_client as make_client


@pytest.fixture
def renewer(clock: FakeClock) -> Renewer:
    return Renewer(clock=clock, start_thread=False)


# -- timing validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "param"),
    [
        ({"request_timeout_s": 3.0, "renew_interval_s": 5.0}, "request_timeout_s"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"renew_interval_s": 0}, "renew_interval_s"),
        ({"safety_margin_s": -1}, "safety_margin_s"),
        ({"drift_rate": 0.5}, "drift_rate"),
        ({"retry_interval_s": 0}, "retry_interval_s"),
    ],
)
def test_the_client_refuses_unsafe_timing_at_start_up_naming_the_parameter(
    options: dict, param: str
) -> None:
    with pytest.raises(TimingError) as caught:
        Client("http://leaseboard.test", "t", timing=ClientTiming(**options))
    assert caught.value.param == param and param in str(caught.value)


def test_a_request_timeout_of_exactly_half_the_renew_interval_is_allowed() -> None:
    ClientTiming(request_timeout_s=2.5, renew_interval_s=5.0).validate()


@pytest.mark.parametrize(
    ("ttl_ms", "renew_after_ms", "param"),
    [
        (3_000, None, "ttl_ms"),  # 3 s × 0.99 − 1 s margin leaves less than 5 s + 1 s
        (15_000, 1_500, "request_timeout_s"),  # the server asks for renewals every 1.5 s
    ],
)
def test_a_lease_this_client_could_not_keep_is_refused(
    ttl_ms: int, renew_after_ms: int | None, param: str
) -> None:
    with pytest.raises(TimingError) as caught:
        TIMING.validate_lease(ttl_ms=ttl_ms, renew_after_ms=renew_after_ms)
    assert caught.value.param == param


def test_hold_releases_a_lease_whose_timing_it_cannot_honour(
    server: FakeServer, renewer: Renewer
) -> None:
    server.renew_after_ms = 1_000
    client = make_client(server, renewer)
    with pytest.raises(TimingError, match="request_timeout_s"):
        client.hold("job-1")
    assert server.requests[-1][1].endswith("/release")
    assert renewer.holdings() == []


# What every queue may configure (docs/design.md §4): the server's own validation decides.
SERVER_VALID_LEASES = [
    (ttl, renew)
    for ttl in (3, 300, 1_000, 2_000, 6_000, 9_000, 15_000, 60_000, 3_600_000, 2**31 - 1)
    for renew in (None, 1, ttl // 10, ttl // 3)
]


def test_the_default_timing_keeps_every_lease_the_server_accepts() -> None:
    from leaseboard.domain.timing import TimingPolicy, TimingPolicyError

    kept = 0
    for ttl_ms, renew_after_ms in SERVER_VALID_LEASES:
        try:
            policy = TimingPolicy(ttl_ms=ttl_ms, renew_after_ms=renew_after_ms).resolved()
        except TimingPolicyError:
            continue  # no queue can ask for it
        assert policy.renew_after_ms is not None
        lease = ClientTiming().validate_lease(ttl_ms=ttl_ms, renew_after_ms=policy.renew_after_ms)
        interval = lease.interval_for(policy.renew_after_ms)
        assert lease.timeout_s == pytest.approx(min(2.0, interval / 2))
        assert lease.margin_s == pytest.approx(min(1.0, ttl_ms / 10_000))
        kept += 1
    assert kept >= 30, kept


def test_a_timeout_set_by_hand_is_still_checked_against_each_lease() -> None:
    with pytest.raises(TimingError, match="request_timeout_s"):
        ClientTiming(request_timeout_s=2.0).validate_lease(ttl_ms=9_000, renew_after_ms=3_000)


def test_the_default_client_holds_the_demos_payments_lease_renewing_within_half_its_interval(
    clock: FakeClock, renewer: Renewer
) -> None:
    # The demo's payments queue: ttl 9 s, so the server asks for a renewal every 3 s; the
    # default client once refused it (TimingError: a 2 s request timeout is over 1.5 s).
    server = FakeServer(clock, ttl_ms=9_000)
    timeouts: list[tuple[str, float]] = []

    def recording(request: httpx.Request) -> httpx.Response:
        timeouts.append((request.url.path, request.extensions["timeout"]["read"]))
        return server(request)

    client = Client(
        "http://leaseboard.test",
        "t",
        transport=httpx.MockTransport(recording),
        clock=clock,
        renewer=renewer,
    )
    holding = client.hold("job-1")
    assert holding.interval_s == 3.0 and holding.request_timeout_s == 1.5
    # Local deadline: 9 s x 0.99 less a 0.9 s margin (a tenth of the ttl, under the 1 s cap).
    assert holding.deadline == pytest.approx(clock.now + 9.0 * 0.99 - 0.9)
    clock.now += 3.0
    renewer.tick()
    holding.renew_now()
    assert timeouts[0] == ("/api/v1/work-items/job-1/lease", 2.0)  # not tied to one lease
    renewals = [t for path, t in timeouts if "renew" in path]
    assert renewals == [1.5, 1.5], timeouts
    holding.release()


# -- the local deadline ------------------------------------------------------------------


def test_local_deadline_arithmetic() -> None:
    got = local_deadline(sent_at=100.0, expires_in_ms=15_000, safety_margin_s=1.0, drift_rate=0.01)
    assert got == pytest.approx(100.0 + 15.0 * 0.99 - 1.0)
    assert TIMING.local_deadline(sent_at=0.0, expires_in_ms=10_000) == pytest.approx(8.9)


def test_the_deadline_is_measured_from_when_the_acquire_was_sent(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    server.latency_s = 4.0  # the answer takes 4 s to come back
    sent = clock.now
    holding = make_client(server, renewer).hold("job-1")
    assert clock.now == sent + 4.0
    assert holding.deadline == pytest.approx(sent + 15.0 * 0.99 - 1.0)
    assert holding.remaining_s() == pytest.approx(15.0 * 0.99 - 1.0 - 4.0)


def test_a_renewal_moves_the_deadline_from_its_send_time_not_its_answer_time(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    clock.now += 5.0
    server.latency_s = 2.5
    sent = clock.now
    renewer.tick()
    assert server.count("/api/v1/leases/renew") == 1
    assert holding.deadline == pytest.approx(sent + 14.85 - 1.0)
    assert holding.last_ack_sent_at == sent
    assert holding.fencing_token == "tok-renewed"


def test_a_late_answer_to_an_older_request_never_pulls_the_deadline_back(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    before = holding.deadline
    holding._renewed(sent_at=clock.now - 3.0, expires_in_ms=15_000)
    assert holding.deadline == before


def test_past_the_local_deadline_guarded_calls_raise_before_any_request(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    clock.now = holding.deadline - 0.001
    assert holding.active and holding.headers()["X-Lease-Epoch"] == "1"
    clock.now = holding.deadline
    sent_before = len(server.requests)
    with pytest.raises(LocalJeopardy):
        holding.propose("charge", "acct-9")
    with pytest.raises(LocalJeopardy):
        holding.headers()
    with pytest.raises(LocalJeopardy):
        with holding.guard():
            pytest.fail("the guarded block must not run")
    assert len(server.requests) == sent_before  # refused locally, before the server could
    assert holding.in_jeopardy and holding.lost is None
    # Checkpoints are still allowed in jeopardy (docs/design.md §4).
    server.fail_next.append(httpx.Response(201, json={"seq": 4}))
    assert holding.checkpoint({"step": 4}) == 4


# -- transient versus authoritative failures ---------------------------------------------


def test_one_transient_error_does_not_end_the_holding(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    lost: list[LeaseError] = []
    holding = make_client(server, renewer).hold("job-1", on_lost=lambda h, e: lost.append(e))
    clock.now += 5.0
    server.fail_next.append(httpx.Response(503, text="upstream down"))
    renewer.tick()
    assert holding.active and not lost
    assert holding.consecutive_failures == 1
    assert isinstance(holding.last_error, TransientError)
    assert holding.next_renew_at == pytest.approx(clock.now + 1.25)  # retry at interval / 4
    server.fail_next.append(httpx.ConnectError("refused"))
    clock.now = holding.next_renew_at
    renewer.tick()
    assert holding.consecutive_failures == 2 and holding.last_error.code == "network"
    clock.now = holding.next_renew_at
    sent = clock.now
    renewer.tick()
    assert holding.consecutive_failures == 0
    assert holding.deadline == pytest.approx(sent + 13.85)


def test_a_whole_batch_refusal_carrying_a_lease_code_ends_no_lease(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    clock.now += 5.0
    server.fail_next.append(httpx.Response(409, json={"code": "stale_epoch"}))
    renewer.tick()
    assert holding.lost is None and holding.consecutive_failures == 1


@pytest.mark.parametrize(("code", "error"), AUTHORITATIVE_REFUSALS)
def test_an_authoritative_renew_refusal_ends_the_holding_at_once(
    server: FakeServer, renewer: Renewer, clock: FakeClock, code: str, error: type
) -> None:
    lost: list[tuple[Holding, LeaseError]] = []
    client = make_client(server, renewer)
    holding = client.hold("job-1", on_lost=lambda h, e: lost.append((h, e)))
    other = client.hold("job-2")
    server.lease_codes[holding.lease_id] = code
    clock.now += 5.0
    renewer.tick()
    assert len(lost) == 1 and lost[0][0] is holding and isinstance(lost[0][1], error)
    assert renewer.holdings() == [other] and other.active
    sent_before = len(server.requests)
    with pytest.raises(error):
        holding.propose("charge", "acct-9")  # well before the local deadline
    with pytest.raises(error):
        holding.headers()
    assert len(server.requests) == sent_before
    holding.release()  # nothing to release on the server: the lease is already gone
    assert len(server.requests) == sent_before


def test_an_authoritative_effect_refusal_ends_the_holding(
    server: FakeServer, renewer: Renewer
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    server.fail_next.append(
        httpx.Response(
            409,
            json={
                "code": "stale_epoch",
                "detail": "taken over",
                "current_epoch": 2,
                "your_epoch": 1,
            },
        )
    )
    with pytest.raises(StaleEpoch) as caught:
        holding.propose("charge", "acct-9")
    assert caught.value.current_epoch == 2 and caught.value.your_epoch == 1
    assert holding.lost is caught.value and renewer.holdings() == []


def test_in_jeopardy_from_the_server_refuses_the_effect_but_keeps_the_holding(
    server: FakeServer, renewer: Renewer
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    server.fail_next.append(httpx.Response(409, json={"code": "in_jeopardy"}))
    with pytest.raises(InJeopardy):
        holding.propose("charge", "acct-9")
    assert holding.lost is None and renewer.holdings() == [holding]


def test_an_operators_hold_is_local_quiescence_until_a_renewal_says_it_is_released(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    server.held[holding.lease_id] = "misbehaving: doubled refunds"
    clock.now += 5.0
    renewer.tick()  # the batch renew says: on hold
    assert holding.on_hold and holding.active and holding.lost is None
    effects_before = server.count("/api/v1/effects")
    with pytest.raises(OnHold, match="doubled refunds"):
        holding.propose("charge", "acct-9")
    with pytest.raises(OnHold):
        with holding.effect("charge", "acct-9"):
            pass
    assert server.count("/api/v1/effects") == effects_before  # refused before any request
    del server.held[holding.lease_id]
    holding.renew_now()  # the single renew says: released
    assert not holding.on_hold
    assert holding.propose("charge", "acct-9").authorized


def test_an_on_hold_refusal_quiesces_without_ending_the_holding(
    server: FakeServer, renewer: Renewer
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    server.fail_next.append(httpx.Response(409, json={"code": "on_hold", "detail": "held"}))
    with pytest.raises(OnHold):
        holding.propose("charge", "acct-9")
    assert holding.on_hold and holding.lost is None and renewer.holdings() == [holding]


# -- one renewer, batched ----------------------------------------------------------------


def test_a_hundred_leases_renew_in_one_request_per_interval(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    client = make_client(server, renewer)
    holdings = []
    for i in range(100):
        holdings.append(client.hold(f"job-{i}"))
        clock.now += 0.02  # acquired over two seconds
    end = clock.now + 30.0
    while (wake := renewer.tick()) is not None and wake <= end:
        clock.now = max(clock.now, wake)
    # 30 s at a 5 s interval: six requests, each carrying every lease.
    assert server.count("/api/v1/leases/renew") == 6
    assert all(len(b["leases"]) == 100 for m, p, b in server.requests if p.endswith("/renew"))
    assert all(h.active for h in holdings)


def test_each_client_gets_its_own_batch(server: FakeServer, renewer: Renewer, clock: FakeClock):
    first, second = make_client(server, renewer), make_client(server, renewer)
    first.hold("a"), first.hold("b"), second.hold("c")
    clock.now += 5.0
    renewer.tick()
    batches = sorted(len(b["leases"]) for _, p, b in server.requests if p == "/api/v1/leases/renew")
    assert batches == [1, 2]


def test_renew_many_chunks_at_the_server_limit(server: FakeServer, renewer: Renewer) -> None:
    results = make_client(server, renewer).renew_many([(str(i), 1) for i in range(1500)])
    assert len(results) == 1500 and all(r.ok for r in results)
    assert server.count("/api/v1/leases/renew") == 2


def test_the_background_thread_renews_without_being_driven() -> None:
    renewed = threading.Event()
    clock = FakeClock()
    server = FakeServer(clock, ttl_ms=900)
    server.renew_after_ms = 200

    def handler(request: httpx.Request) -> httpx.Response:
        response = server(request)
        if request.url.path == "/api/v1/leases/renew":
            renewed.set()
        return response

    renewer = Renewer()
    client = Client(
        "http://leaseboard.test",
        "t",
        timing=ClientTiming(request_timeout_s=0.1, renew_interval_s=0.2, safety_margin_s=0.1),
        transport=httpx.MockTransport(handler),
        renewer=renewer,
    )
    try:
        with client.hold("job-1") as holding:
            assert renewed.wait(5), "the renewer thread never renewed"
            assert holding.active
        assert renewer.holdings() == []
    finally:
        renewer.stop()


# -- API calls and error mapping ---------------------------------------------------------


def test_effects_attach_epoch_and_token_to_outgoing_calls(
    server: FakeServer, renewer: Renewer
) -> None:
    holding = make_client(server, renewer).hold("job-1")
    assert holding.checkpoint_data == {"step": 3}
    effect = holding.propose("charge", "acct-9", payload={"cents": 100}, idempotency_key="k1")
    assert effect.authorized and effect.effect_id == "e1"
    assert holding.headers(effect) == {
        "X-Lease-Epoch": "1",
        "X-Work-Key": "job-1",
        "X-Fencing-Token": "tok-e1",
    }
    assert holding.headers()["X-Fencing-Token"] == "tok-acquire"
    sent = server.requests[-1][2]
    assert sent["idempotency_key"] == "k1" and sent["epoch"] == 1 and sent["payload"]
    pending = holding.propose("wire", "acct-9")
    assert pending.decision == "pending_approval" and not pending.authorized
    holding.report_outcome(effect.effect_id, "applied", "ok")
    assert server.requests[-1][1] == "/api/v1/effects/e1/outcome"


@pytest.mark.parametrize(
    ("response", "error", "code"),
    [
        (httpx.Response(409, json={"code": "work_leased", "title": "held"}), WorkLeased, None),
        (httpx.Response(403, json={"code": "not_holder"}), NotHolder, None),
        (httpx.Response(500, text="<html>oops</html>"), TransientError, "transient"),
        (httpx.Response(502, json={"code": "bad_gateway"}), TransientError, "transient"),
        (httpx.Response(429, json={"code": "rate_limited"}), TransientError, "rate_limited"),
        (httpx.Response(418, json={"code": "teapot"}), LeaseError, "teapot"),
        (httpx.Response(400, text="nope"), LeaseError, "http_400"),
        (httpx.ReadTimeout("slow"), TransientError, "timeout"),
        (httpx.ConnectError("down"), TransientError, "network"),
    ],
)
def test_problem_details_become_typed_errors(
    server: FakeServer, renewer: Renewer, response: Any, error: type, code: str | None
) -> None:
    server.fail_next.append(response)
    with pytest.raises(error) as caught:
        make_client(server, renewer).acquire("job-1")
    if code is not None:
        assert caught.value.code == code


def test_work_keys_are_quoted_into_paths(server: FakeServer, renewer: Renewer) -> None:
    grant = make_client(server, renewer).acquire("tenant/job 1", ttl_ms=12_000)
    assert server.raw_paths[-1] == "/api/v1/work-items/tenant%2Fjob%201/lease"
    assert server.requests[-1][2] == {"ttl_ms": 12_000}
    assert grant.ttl_ms == 12_000


# -- Leaseboard's own outage: 503 unavailable is uncertainty, never loss (docs/design.md §14) ------

UNAVAILABLE = {
    "type": "urn:leaseboard:problem:unavailable",
    "title": "Leaseboard cannot reach its database",
    "status": 503,
    "detail": "the database is unreachable or stopped answering; nothing was changed",
    "code": "unavailable",
    "reason": "unreachable",
    "request_id": "r-1",
    "retry_after_ms": 1000,
}


def unavailable() -> httpx.Response:
    return httpx.Response(
        503,
        json=UNAVAILABLE,
        headers={"Content-Type": "application/problem+json", "Retry-After": "1"},
    )


def test_unavailable_and_internal_error_are_transient_with_what_the_server_said(
    server: FakeServer, renewer: Renewer
) -> None:
    server.fail_next.append(unavailable())
    with pytest.raises(Unavailable) as caught:
        make_client(server, renewer).acquire("job-1")
    assert isinstance(caught.value, TransientError) and not isinstance(caught.value, LeaseLost)
    assert caught.value.reason == "unreachable" and caught.value.retry_after_s == 1.0
    server.fail_next.append(
        httpx.Response(500, json={"code": "internal_error", "status": 500, "request_id": "r-9"})
    )
    with pytest.raises(InternalError) as internal:
        make_client(server, renewer).acquire("job-1")
    assert isinstance(internal.value, TransientError) and internal.value.request_id == "r-9"


def _watched(server: FakeServer, renewer: Renewer) -> tuple[Holding, list[LeaseError]]:
    """A holding of job-1 and the errors its on_lost callback was given."""
    lost: list[LeaseError] = []
    holding = make_client(server, renewer).hold("job-1", on_lost=lambda h, e: lost.append(e))
    return holding, lost


def test_a_database_outage_past_the_local_deadline_is_jeopardy_then_the_next_ack_resumes(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    holding, lost = _watched(server, renewer)
    deadline = holding.deadline
    # Every renewal meets 503 for 14.5 s, longer than the 13.85 s the lease had left (and
    # shorter than the 16.15 s after which the server's lease is certainly gone).
    server.fail_next.extend(unavailable() for _ in range(100))
    jeopardy_at = None
    while clock.now < deadline + 0.5:
        clock.now += 0.25
        renewer.tick()
        if jeopardy_at is None and holding.in_jeopardy:
            jeopardy_at = clock.now
    assert jeopardy_at == pytest.approx(deadline, abs=0.25)  # the local deadline, as it was
    assert holding.lost is None and not lost and renewer.holdings() == [holding]
    assert isinstance(holding.last_error, Unavailable) and holding.consecutive_failures > 5
    sent = len(server.requests)
    with pytest.raises(LocalJeopardy):
        holding.propose("charge", "acct-9")
    with pytest.raises(LocalJeopardy):
        holding.headers()
    assert len(server.requests) == sent  # refused before any request left
    # The database is back (the fake server's lease outlived the outage): the next renewal
    # is acknowledged and the holding is active again, with a deadline from that send.
    server.fail_next.clear()
    clock.now = holding.next_renew_at
    sent_at = clock.now
    renewer.tick()
    assert holding.active and holding.consecutive_failures == 0 and not lost
    assert holding.deadline == pytest.approx(sent_at + 13.85)
    assert holding.propose("charge", "acct-9").authorized


def test_an_outage_past_the_ttl_loses_the_holding_locally_and_stops_renewing_it(
    server: FakeServer, renewer: Renewer, clock: FakeClock
) -> None:
    # The server refuses any renewal past the expiry, so once no answer could have kept
    # the lease alive (ttl x (1 + drift) + margin after the last acknowledgement arrived)
    # renewing it only loads a server that is already failing: the SDK lets it go.
    holding, lost = _watched(server, renewer)
    granted_at = clock.now
    renews: list[float] = []

    def refused(request: httpx.Request) -> httpx.Response:
        renews.append(clock.now)
        return unavailable()

    server.fail_next.extend(refused for _ in range(1000))
    while clock.now < granted_at + 30:
        clock.now += 0.25
        renewer.tick()
        if not holding.lost:
            assert clock.now < granted_at + 15 * 1.01 + 1.0 + 0.25
    assert len(lost) == 1 and lost[0] is holding.lost
    assert isinstance(holding.lost, LeaseLost) and holding.lost.code == "lease_expired"
    assert "cannot be live" in str(holding.lost)
    # Lost at the bound, not before: the last renewal attempt went out just before it.
    assert len(renews) >= 8 and granted_at + 14.5 <= max(renews) < granted_at + 16.15
    assert renewer.holdings() == []
    sent = len(server.requests)
    clock.now += 20
    renewer.tick()
    assert len(server.requests) == sent  # never sent again
    with pytest.raises(LeaseLost):
        holding.ensure()


def test_hold_after_a_timed_out_acquire_releases_its_own_unseen_grant_and_holds(
    server: FakeServer, renewer: Renewer
) -> None:
    # An overloaded server granted the lease after the agent stopped waiting: the retry
    # meets work_leased naming the agent's own lease. Before, hold raised WorkLeased and the
    # orphan stood in the way of every retry until its ttl ran out.
    granted: list[tuple[str, int]] = []
    server.fail_next.extend([granted_then_lost(server, granted), own_lease_in_the_way(granted)])
    holding = make_client(server, renewer).hold("job-1")
    assert holding.active and len(granted) == 1 and holding.lease_id != granted[0][0]
    calls = [(m, p.rsplit("/", 1)[-1], b) for m, p, b in server.requests]
    assert [c[1] for c in calls] == ["lease", "lease", "release", "lease"]
    assert calls[2][2] == {"epoch": granted[0][1]}
    assert server.requests[2][1] == f"/api/v1/leases/{granted[0][0]}/release"


def test_hold_asks_once_again_after_a_lost_answer_and_a_plain_503_is_not_asked_again(
    server: FakeServer, renewer: Renewer
) -> None:
    client = make_client(server, renewer)
    lost = [httpx.ReadTimeout("timed out"), httpx.ReadTimeout("timed out again")]
    server.fail_next.extend(lost)
    with pytest.raises(TransientError) as caught:
        client.hold("job-1")
    assert caught.value.code == "timeout" and server.count("/api/v1/work-items/job-1/lease") == 2
    # Nothing was changed, the server said: no reason to think a grant is waiting.
    server.fail_next.append(unavailable())
    with pytest.raises(Unavailable):
        client.hold("job-2")
    assert server.count("/api/v1/work-items/job-2/lease") == 1
