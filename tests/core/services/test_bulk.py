"""The bounds every bulk act shares (core.services.bulk)."""

from __future__ import annotations

import pytest

from leaseboard.core.services.bulk import BULK_MAX, ItemOutcome, each_item, ids_checked
from leaseboard.domain.errors import NotFound, ValidationFailed


def test_ids_are_stripped_kept_once_in_order_and_bounded():
    assert ids_checked([" b", "a", "b", "", None], what="lease", param="p") == ["b", "a"]
    with pytest.raises(ValidationFailed) as none:
        ids_checked(["  "], what="lease", param="lease_ids")
    assert none.value.code == "validation_error"
    with pytest.raises(ValidationFailed, match=f"at most {BULK_MAX} leases"):
        ids_checked([str(i) for i in range(BULK_MAX + 1)], what="lease", param="p")
    assert "\x00" not in ids_checked(["a\x00b"], what="lease", param="p")[0]


def test_one_refused_item_does_not_stop_the_others():
    def one(raw: str) -> ItemOutcome:
        if raw == "bad":
            raise NotFound("no such thing")
        return ItemOutcome(raw, True, work_key=f"w-{raw}")

    out = each_item(["a", "bad", "c"], one, named=lambda raw: ItemOutcome(raw, False, "w"))
    assert [(o.id, o.ok, o.code) for o in out] == [
        ("a", True, None),
        ("bad", False, "not_found"),
        ("c", True, None),
    ]
    assert out[1].detail == "no such thing" and out[1].work_key == "w"
