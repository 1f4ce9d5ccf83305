"""Pure domain rules: no database, parametrized tables."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from leaseboard.domain.certainty import Certainty, LeaseTimes, can_transition, state_at
from leaseboard.domain.errors import ALL_CODES
from leaseboard.domain.reconciliation import needs_reconciliation
from leaseboard.domain.timing import TimingPolicy, TimingPolicyError

DOMAIN = Path(__file__).resolve().parents[2] / "leaseboard" / "domain"
FORBIDDEN = {"django", "celery", "redis", "kombu", "psycopg", "leaseboard.core"}


def test_the_domain_package_imports_no_framework():
    offenders = []
    for path in DOMAIN.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


T = LeaseTimes
A, J, E = Certainty.ACTIVE, Certainty.JEOPARDY, Certainty.EXPIRED


@pytest.mark.parametrize(
    ("times", "now", "expected"),
    [
        (T(A, 100, 200), 99, A),
        (T(A, 100, 200), 100, J),  # no sweep needed: time alone puts it in jeopardy
        (T(A, 100, 200), 199, J),
        (T(A, 100, 200), 200, E),  # invalid the instant expires_at passes
        (T(J, 100, 200), 50, J),  # a materialized jeopardy stays until a renewal
        (T(Certainty.RELEASED, 100, 200), 50, Certainty.RELEASED),
        (T(Certainty.REVOKED, 100, 200), 500, Certainty.REVOKED),
    ],
)
def test_state_at(times, now, expected):
    assert state_at(times, now) is expected


@pytest.mark.parametrize("terminal", [Certainty.EXPIRED, Certainty.RELEASED, Certainty.REVOKED])
def test_terminal_states_never_come_back(terminal):
    assert not any(can_transition(terminal, other) for other in Certainty)


def test_jeopardy_renews_back_to_active():
    assert can_transition(J, A)


def test_default_policy_follows_the_ttl():
    p = TimingPolicy(ttl_ms=15_000).resolved()
    assert (p.renew_after_ms, p.jeopardy_after_ms, p.lock_delay_ms) == (5_000, 10_000, 0)


@pytest.mark.parametrize(
    ("policy", "param"),
    [
        (TimingPolicy(ttl_ms=9_000, renew_after_ms=4_000), "ttl_ms"),
        (TimingPolicy(ttl_ms=15_000, jeopardy_after_ms=15_000), "jeopardy_after_ms"),
        (TimingPolicy(ttl_ms=15_000, jeopardy_after_ms=20_000), "jeopardy_after_ms"),
        (TimingPolicy(ttl_ms=15_000, request_timeout_ms=3_000), "request_timeout_ms"),
        (TimingPolicy(ttl_ms=0), "ttl_ms"),
        (TimingPolicy(ttl_ms=15_000, max_lifetime_ms=1_000), "max_lifetime_ms"),
    ],
)
def test_unsafe_timing_is_refused_naming_the_parameter(policy, param):
    with pytest.raises(TimingPolicyError) as info:
        policy.resolved()
    assert info.value.param == param


def test_overrides_rederive_from_a_new_ttl():
    p = TimingPolicy().resolved().with_overrides({"ttl_ms": 3_000})
    assert (p.ttl_ms, p.renew_after_ms, p.jeopardy_after_ms) == (3_000, 1_000, 2_000)
    with pytest.raises(TimingPolicyError):
        TimingPolicy().resolved().with_overrides({"bogus_ms": 1})


@pytest.mark.parametrize(
    ("decision", "outcome", "resolution", "blocked"),
    [
        ("authorized", "", "", True),
        ("authorized", "unknown", "", True),
        ("authorized", "unknown", "compensated", False),
        ("authorized", "applied", "", False),
        ("authorized", "failed", "", False),
        ("refused", "", "", False),
        ("pending_approval", "", "", False),
    ],
)
def test_reconciliation_gate(decision, outcome, resolution, blocked):
    assert needs_reconciliation(decision, outcome, resolution) is blocked


def test_error_codes_are_the_design_list():
    assert ALL_CODES == {
        "stale_epoch",
        "lease_expired",
        "lease_revoked",
        "lease_released",
        "not_holder",
        "in_jeopardy",
        "work_not_admitted",
        "work_leased",
        "lock_delay",
        "needs_reconciliation",
        "policy_denied",
        "approval_required",
        "capacity_exhausted",
        "takeover_conflict",
        "not_found",
        "validation_error",
        "unauthenticated",
        "forbidden",
        "rate_limited",
        "idempotency_conflict",
        "payload_mismatch",
        "on_hold",
        "already_decided",
        "approval_expired",
        "queue_not_allowed",
        "unavailable",
        "internal_error",
    }
