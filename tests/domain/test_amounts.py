"""leaseboard.domain.amounts: amounts in minor units shown as people read them."""

from __future__ import annotations

import pytest

from leaseboard.domain.amounts import (
    Amount,
    DisplayHint,
    amount_shown,
    hint_for,
    hint_problems,
    money,
)


@pytest.mark.parametrize(
    ("minor", "currency", "units", "shown"),
    [
        (125_000, "USD", 2, "$1,250.00"),
        (5, "USD", 2, "$0.05"),
        (0, "EUR", 2, "€0.00"),
        (-1_999, "GBP", 2, "-£19.99"),
        (1_250, "JPY", 0, "¥1,250"),
        (1_234_567, "KWD", 3, "KWD 1,234.567"),
        (10**18 + 1, "USD", 2, "$10,000,000,000,000,000.01"),  # integers only, no rounding
        (12_345, "CLF", 4, "CLF 1.2345"),
    ],
)
def test_money_groups_thousands_and_keeps_every_minor_unit(minor, currency, units, shown):
    assert money(minor, currency, units) == shown


REFUND = DisplayHint("refund.*", "amount_cents", "USD", 2)
PAYMENTS = DisplayHint("payment.*", "amount_cents", "EUR", 2, currency_field="currency")
LEDGER_YEN = DisplayHint("payment.yen.*", "amount", "JPY", 0)


def test_the_most_specific_glob_decides():
    hints = [PAYMENTS, LEDGER_YEN, REFUND]
    assert hint_for("payment.yen.charge", hints) is LEDGER_YEN
    assert hint_for("payment.charge", hints) is PAYMENTS
    assert hint_for("deploy.apply", hints) is None


def test_an_amount_is_read_from_the_declared_field_in_the_declared_currency():
    assert amount_shown("refund.issue", {"amount_cents": 125_000}, [REFUND]) == Amount(
        "amount_cents", "$1,250.00"
    )


def test_a_currency_field_in_the_payload_names_the_currency_when_it_is_a_code():
    hints = [PAYMENTS]
    assert amount_shown("payment.charge", {"amount_cents": 100, "currency": "usd"}, hints) == (
        Amount("amount_cents", "$1.00")
    )
    assert amount_shown("payment.charge", {"amount_cents": 100, "currency": "??"}, hints) == (
        Amount("amount_cents", "€1.00")
    )


@pytest.mark.parametrize(
    "payload",
    [{}, {"amount_cents": "125000"}, {"amount_cents": 12.5}, {"amount_cents": True}, [1], None],
)
def test_no_amount_unless_the_field_holds_a_whole_number(payload):
    assert amount_shown("refund.issue", payload, [REFUND]) is None


def test_a_kind_without_a_hint_shows_no_amount():
    assert amount_shown("deploy.apply", {"amount_cents": 1}, [REFUND]) is None


@pytest.mark.parametrize(
    ("kind", "table", "problems"),
    [
        ("refund.*", {"amount_field": "amount_cents", "currency": "USD"}, set()),
        ("refund.*", {"amount_field": "amount_cents", "currency": "usd"}, {"currency"}),
        ("refund.*", {"amount_field": "a b", "currency": "USD"}, {"amount_field"}),
        ("refund.*", {"currency": "USD"}, {"amount_field"}),
        ("refund.*", {"amount_field": "x", "currency": "USD", "minor_units": 5}, {"minor_units"}),
        (
            "refund.*",
            {"amount_field": "x", "currency": "USD", "minor_units": True},
            {"minor_units"},
        ),
        ("refund.*", {"amount_field": "x", "currency": "USD", "symbol": "$"}, {"symbol"}),
        (
            "refund.*",
            {"amount_field": "x", "currency": "USD", "currency_field": 3},
            {"currency_field"},
        ),
        ("a kind", {"amount_field": "x", "currency": "USD"}, {""}),
        ("refund.*", "USD", {""}),
    ],
)
def test_a_bad_hint_names_each_problem_by_its_field(kind, table, problems):
    assert set(hint_problems(kind, table)) == problems
