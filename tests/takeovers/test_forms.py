"""The takeover request forms (leaseboard.takeovers.forms): the standing field's bounds and
default come from the takeover settings, in minutes, and are enforced on the server (not
only by the browser's min/max); no reason category is preselected."""

from __future__ import annotations

import pytest

from leaseboard.takeovers.forms import REASON_CHOICES, BulkRequestForm, TakeoverRequestForm


@pytest.fixture
def standing(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_TAKEOVER_MIN_STANDING_MS = 5 * 60_000
    settings.LEASEBOARD_TAKEOVER_DEFAULT_STANDING_MS = 20 * 60_000
    settings.LEASEBOARD_TAKEOVER_MAX_STANDING_MS = 90 * 60_000


def _ask(minutes: object) -> dict[str, object]:
    return {"reason_category": "stuck", "reason_text": "no progress", "standing_minutes": minutes}


def test_the_standing_field_offers_the_settings_bounds_in_minutes(standing) -> None:  # type: ignore[no-untyped-def]
    field = TakeoverRequestForm().fields["standing_minutes"]
    assert (field.initial, field.min_value, field.max_value) == (20, 5, 90)
    assert (field.widget.attrs["min"], field.widget.attrs["max"]) == (5, 90)
    assert REASON_CHOICES[0][0] == ""


@pytest.mark.parametrize("minutes", [4, 91, "soon"])
def test_a_standing_outside_the_bounds_is_refused_at_its_field(standing, minutes) -> None:  # type: ignore[no-untyped-def]
    form = TakeoverRequestForm(_ask(minutes))
    assert not form.is_valid()
    assert list(form.errors) == ["standing_minutes"]


def test_a_request_within_the_bounds_is_accepted_with_nobody_else_named(standing) -> None:  # type: ignore[no-untyped-def]
    form = TakeoverRequestForm(_ask(90))
    assert form.is_valid(), form.errors
    data = form.cleaned_data
    assert (data["standing_minutes"], data["grantee_operator"], data["agent"]) == (90, "", "")
    assert data["hold_while_waiting"] is False


def test_a_bulk_request_needs_its_keys_reason_and_idempotency_key() -> None:
    assert set(BulkRequestForm({}).errors) == {
        "work_keys",
        "reason_category",
        "reason_text",
        "idempotency_key",
    }
    bulk = BulkRequestForm(
        {
            "work_keys": "a-1\na-2",
            "reason_category": "incident",
            "reason_text": "outage",
            "idempotency_key": "b-1",
        }
    )
    assert bulk.is_valid(), bulk.errors
