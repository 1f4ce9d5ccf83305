"""leaseboard.takeovers.selectors.narrowing: a filter left empty narrows nothing; each one
filled in is one `.filter`, in the order given."""

from __future__ import annotations

from leaseboard.takeovers.models import Intervention
from leaseboard.takeovers.selectors.narrowing import narrowed


def test_empty_filters_narrow_nothing() -> None:
    qs = Intervention.objects.all()
    assert str(narrowed(qs, agent__name="", outcome="").query) == str(qs.query)


def test_each_filled_in_filter_is_one_filter_in_order() -> None:
    got = narrowed(Intervention.objects.all(), agent__name="a1", reason_category="", outcome="x")
    want = Intervention.objects.filter(agent__name="a1").filter(outcome="x")
    assert str(got.query) == str(want.query)
