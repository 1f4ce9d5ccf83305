"""Pure rules behind the input bounds: which text every database can store, and the
bounds on lease timing (32-bit durations; an item may tighten its queue, not outlive it)."""

from __future__ import annotations

import pytest

from leaseboard.domain.text import filter_text, json_storable, storable, storable_or_replaced
from leaseboard.domain.timing import MAX_DURATION_MS, TimingPolicy, TimingPolicyError


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("plain", True),
        ("ünïcødé ✓ 🚀", True),
        ("", True),
        ("a\x00b", False),
        ("\ud800", False),
        ("x\udfffy", False),
        ("\U0001f680", True),  # a pair, not a lone surrogate
    ],
)
def test_storable_text_has_no_nul_and_no_lone_surrogate(text, ok):
    assert storable(text) is ok
    assert storable(storable_or_replaced(text))
    assert (storable_or_replaced(text) == text) is ok


def test_a_text_filter_is_trimmed_bounded_and_storable():
    params = {"q": "  refund\x00-7  ", "queue": "p" * 300}
    assert filter_text(params, "q", 200) == "refund\ufffd-7"
    assert filter_text(params, "queue", 100) == "p" * 100
    assert filter_text(params, "holder", 150) == ""


@pytest.mark.parametrize(
    ("doc", "ok"),
    [
        ({"a": [1, "b", {"c": None}]}, True),
        ({"a": [1, "b\x00"]}, False),
        ({"a\ud800": 1}, False),
        ([[[{"deep": "\udc00"}]]], False),
        ("\x00", False),
        (12, True),
    ],
)
def test_a_json_document_is_storable_only_if_every_string_and_key_is(doc, ok):
    assert json_storable(doc) is ok


BASE = TimingPolicy(ttl_ms=15_000, max_lifetime_ms=24 * 3_600_000).resolved()


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"ttl_ms": MAX_DURATION_MS + 1, "max_lifetime_ms": MAX_DURATION_MS + 1}, "ttl_ms"),
        ({"lock_delay_ms": MAX_DURATION_MS + 1}, "lock_delay_ms"),
        ({"lock_delay_ms": -1}, "lock_delay_ms"),
        ({"max_lifetime_ms": 48 * 3_600_000}, "max_lifetime_ms"),
        ({"ttl_ms": 30 * 86_400_000}, "ttl_ms"),
        ({"lock_delay_ms": 25 * 3_600_000}, "lock_delay_ms"),
        ({"ttl_ms": True}, "ttl_ms"),
    ],
)
def test_an_item_may_not_leave_the_bounds_or_outlive_its_queue(overrides, param):
    with pytest.raises(TimingPolicyError) as refused:
        BASE.narrowed(overrides)
    assert refused.value.param == param


def test_an_item_may_tighten_its_queue():
    policy = BASE.narrowed({"ttl_ms": 3_000, "max_lifetime_ms": 60_000, "lock_delay_ms": 500})
    assert (policy.ttl_ms, policy.renew_after_ms, policy.max_lifetime_ms) == (3_000, 1_000, 60_000)


def test_a_policy_past_32_bits_is_refused_at_start_up():
    with pytest.raises(TimingPolicyError) as refused:
        TimingPolicy(ttl_ms=15_000, max_lifetime_ms=MAX_DURATION_MS + 1).resolved()
    assert refused.value.param == "max_lifetime_ms"
