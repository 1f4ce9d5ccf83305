"""The operators' revoke, bulk-revoke and lift forms (leaseboard.dashboard.forms): a reason
category is chosen every time (none is preselected, an unknown one is refused), a text is
required and bounded, and the bulk form carries its idempotency key."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from leaseboard.core.models import ReasonCategory
from leaseboard.dashboard.forms import REASON_CHOICES, BulkRevokeForm, LiftForm, ReasonForm


def test_no_category_is_preselected_and_every_known_one_is_offered() -> None:
    assert REASON_CHOICES[0][0] == ""
    assert [value for value, _ in REASON_CHOICES[1:]] == [c.value for c in ReasonCategory]
    assert ReasonForm().fields["reason_category"].initial is None


@pytest.mark.parametrize(
    ("data", "bad"),
    [
        ({"reason_category": "", "reason_text": "why"}, "reason_category"),
        ({"reason_category": "bored", "reason_text": "why"}, "reason_category"),
        ({"reason_category": "stuck", "reason_text": ""}, "reason_text"),
        ({"reason_category": "stuck", "reason_text": "x" * 1001}, "reason_text"),
    ],
)
def test_a_reason_without_a_known_category_or_a_bounded_text_is_refused(data, bad) -> None:  # type: ignore[no-untyped-def]
    form = ReasonForm(data)
    assert not form.is_valid()
    assert list(form.errors) == [bad]


def test_a_good_reason_and_a_bulk_revoke_with_its_key_are_accepted() -> None:
    reason = ReasonForm({"reason_category": "incident", "reason_text": "  paging  "})
    assert reason.is_valid(), reason.errors
    assert reason.cleaned_data == {"reason_category": "incident", "reason_text": "paging"}
    posted = QueryDict(mutable=True)
    posted.update({"reason_category": "stuck", "reason_text": "stuck for an hour"})
    bulk = BulkRevokeForm(posted)
    assert not bulk.is_valid() and list(bulk.errors) == ["idempotency_key"]
    posted["idempotency_key"] = "bulk-1"
    assert BulkRevokeForm(posted).is_valid()


def test_lifting_a_quarantine_says_why_it_is_safe_again() -> None:
    assert list(LiftForm({"note": ""}).errors) == ["note"]
    assert LiftForm({"note": "patched and redeployed"}).is_valid()
