"""Acknowledging alerts (leaseboard.core.services.alert_acknowledge): a note is required,
a second acknowledgement changes nothing, groups are named "<agent id>:<kind>"."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert
from leaseboard.core.services.alert_acknowledge import (
    GROUPS_MAX,
    alert_acknowledge,
    parse_alert_groups,
)
from leaseboard.core.services.alert_raise import alerts_open, lease_alert
from leaseboard.domain.errors import ValidationFailed
from tests.builders import leased_item, make_user

pytestmark = pytest.mark.django_db


def test_groups_parse_once_each_and_bad_ones_are_refused():
    assert parse_alert_groups(["7:expired", "0:recovery", "7:expired"]) == [
        (7, "expired"),
        (None, "recovery"),
    ]
    for bad in (["x:expired"], ["7:nonsense"], []):
        with pytest.raises(ValidationFailed):
            parse_alert_groups(bad)
    with pytest.raises(ValidationFailed):
        parse_alert_groups([f"{i}:expired" for i in range(1, GROUPS_MAX + 2)])


def test_an_acknowledgement_needs_a_note_and_is_idempotent(agent):
    lease = leased_item(agent("acked-bot")[0])
    (alert_id,) = alerts_open([lease_alert(lease, "expired", "m", due_at_ms=1, now_ms=1)])
    operator = Actor.human(make_user("olga-acks", "operator"))
    with pytest.raises(ValidationFailed):
        alert_acknowledge(alert_id=alert_id, actor=operator, note="  ")
    done = alert_acknowledge(alert_id=alert_id, actor=operator, note="on it")
    again = alert_acknowledge(alert_id=alert_id, actor=operator, note="still on it")
    assert done.changed and not again.changed
    assert Alert.objects.get(id=alert_id).acknowledge_note == "on it"
