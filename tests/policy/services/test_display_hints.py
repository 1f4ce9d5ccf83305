"""leaseboard.policy.services.display_hints: effect kinds declare how their amounts read,
through config as code (round trip byte-identical), and the approver's and operator's
pages show "$1,250.00" instead of `amount_cents: 125000`."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.display_hints import display_hints_loaded
from leaseboard.core.models import AuditEntry, EffectKindDisplay
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.config import (
    config_apply_text,
    config_dumps,
    config_export,
)
from leaseboard.policy.services.display_hints import (
    display_hints_checked,
    display_hints_replace,
)
from tests.builders import effect_rules, effect_under, make_user, signed_in

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

CONFIG = """
version = 1

[effect_kinds."refund.*"]
amount_field = "amount_cents"
currency = "USD"
minor_units = 2

[effect_kinds."payment.*"]
amount_field = "amount_cents"
currency = "EUR"
minor_units = 2
currency_field = "currency"
"""


@pytest.fixture
def admin() -> Actor:
    return Actor.human(make_user("ada", "admin"))


def test_config_declares_hints_and_export_then_apply_is_byte_identical(admin):
    applied = config_apply_text(CONFIG, actor=admin)
    assert [c.what for c in applied.plan.changes] == ["effect kinds' display"]
    assert {h.kind: h.currency for h in display_hints_loaded()} == {
        "payment.*": "EUR",
        "refund.*": "USD",
    }
    exported = config_dumps(config_export())
    assert '[effect_kinds."refund.*"]\namount_field = "amount_cents"\ncurrency = "USD"' in exported
    again = config_apply_text(exported, actor=admin)
    assert again.plan.changes == []
    assert config_dumps(config_export()) == exported
    entry = AuditEntry.objects.get(action="display_hints.update")
    assert entry.before == {} and entry.after["refund.*"]["currency"] == "USD"


def test_a_file_without_the_table_leaves_the_hints_and_an_empty_table_clears_them(admin):
    config_apply_text(CONFIG, actor=admin)
    config_apply_text("version = 1\n", actor=admin)
    assert EffectKindDisplay.objects.count() == 2
    config_apply_text("version = 1\n[effect_kinds]\n", actor=admin)
    assert EffectKindDisplay.objects.count() == 0
    assert "\n[effect_kinds" not in config_dumps(config_export())


def test_a_bad_hint_is_a_field_error_under_its_path_and_nothing_is_written(admin):
    bad = CONFIG.replace('currency = "USD"', 'currency = "dollars"').replace(
        "minor_units = 2\ncurrency_field", "minor_units = 9\ncurrency_field"
    )
    with pytest.raises(SettingsInvalid) as caught:
        config_apply_text(bad, actor=admin)
    assert set(caught.value.errors) == {
        'effect_kinds."refund.*".currency',
        'effect_kinds."payment.*".minor_units',
    }
    assert not EffectKindDisplay.objects.exists()


def _refund(scene, amount: int = 125_000):  # type: ignore[no-untyped-def]
    effect_rules(scene.lease.work_item.queue, ("refund.*", "require_approval"))
    return effect_under(
        scene.lease,
        scene.agent,
        "r-1",
        kind="refund.issue",
        target="order-7",
        payload={"amount_cents": amount, "payee": "acme"},
    )


def test_the_decision_page_inbox_and_work_item_show_the_amount_as_declared(scene, admin):
    display_hints_replace(display_hints_checked({"refund.*": {
        "amount_field": "amount_cents", "currency": "USD", "minor_units": 2
    }}), actor=admin)  # fmt: skip
    effect = _refund(scene)
    approver = signed_in(make_user("abe", "approver"))
    page = approver.get(f"/takeovers/effects/{effect.id}").content.decode()
    assert '<dd id="content-amount"><b>$1,250.00</b>' in page
    inbox = approver.get("/takeovers/pending/").content.decode()
    assert '<li class="amount">amount: <b>$1,250.00</b></li>' in inbox
    assert "amount_cents: <b>125000</b>" not in inbox
    item = signed_in(make_user("olga", "operator")).get(f"/work/{scene.key}").content.decode()
    assert 'order-7 <b class="amount">$1,250.00</b>' in item


def test_without_a_hint_the_payload_reads_as_it_was_sent(scene):
    effect = _refund(scene)
    approver = signed_in(make_user("abe", "approver"))
    assert (
        'id="content-amount"'
        not in approver.get(f"/takeovers/effects/{effect.id}").content.decode()
    )
    assert "amount_cents: <b>125000</b>" in approver.get("/takeovers/pending/").content.decode()
