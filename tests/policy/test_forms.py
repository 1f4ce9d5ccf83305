"""leaseboard.policy.forms: the settings pages' forms parse text into the shapes the
policy services take (and the services validate it). A queue's form round-trips through
the real service and its snapshot in PostgreSQL; a rule's form keeps every field; the
notify form never shows a secret; JSON, TOML and role:queue text is refused with a clear
message; service errors land under the field they name."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.forms import (
    ExplainForm,
    NotifyForm,
    PersonForm,
    QueueForm,
    QueueScopeForm,
    RuleForm,
    errors_to_form,
    queue_field,
)
from leaseboard.policy.services import queues
from tests.builders import make_user

QUEUE_POST = {
    "name": "refunds",
    "capacity": "40",
    "overflow": "reject",
    "ttl_ms": "30000",
    "renew_after_ms": "10000",
    "jeopardy_after_ms": "20000",
    "reconciliation_gate": "on",
    "scopes": "env = staging, prod-*\n\nregion=eu",
    "leases_per_agent": "3",
    "windows_tz": "Europe/Paris",
    "windows": "mon-fri 08:00-18:00\nsat 10:00-12:00",
}


def test_a_queue_form_gives_the_service_its_values() -> None:
    form = QueueForm(QUEUE_POST)
    assert form.is_valid(), form.errors
    values = form.values()
    assert values["timing"] == {
        "ttl_ms": 30000,
        "renew_after_ms": 10000,
        "jeopardy_after_ms": 20000,
    }
    assert values["scopes"] == {"env": ["staging", "prod-*"], "region": ["eu"]}
    assert values["windows"] == {
        "tz": "Europe/Paris",
        "open": [
            {"days": "mon-fri", "from": "08:00", "to": "18:00"},
            {"days": "sat", "from": "10:00", "to": "12:00"},
        ],
    }
    assert (values["capacity"], values["overflow"], values["leases_per_agent"]) == (40, "reject", 3)
    assert values["reconciliation_gate"] is True
    blank = QueueForm({"name": "q", "overflow": "wait"})
    assert blank.is_valid() and blank.values()["windows"] == {} and blank.values()["timing"] == {}


@pytest.mark.django_db
def test_a_saved_queue_fills_its_form_so_saving_it_unchanged_changes_nothing(
    fast_passwords,
) -> None:  # type: ignore[no-untyped-def]
    admin = Actor.human(make_user("ada-forms", "admin"))
    form = QueueForm(QUEUE_POST)
    assert form.is_valid()
    queue = queues.queue_create(name="refunds", values=form.values(), actor=admin)
    snap = queues.queue_snapshot(queue)
    initial = QueueForm.initial_from("refunds", snap)
    again = QueueForm({k: "" if v is None else v for k, v in initial.items() if v is not False})
    assert again.is_valid(), again.errors
    assert again.values()["scopes"] == form.values()["scopes"]
    assert again.values()["windows"] == form.values()["windows"]
    assert again.values()["timing"].items() >= form.values()["timing"].items()


def test_service_errors_land_under_the_field_they_name() -> None:
    assert queue_field("timing.ttl_ms") == "ttl_ms" and queue_field("timing") == "ttl_ms"
    assert queue_field("windows.tz") == "windows_tz" and queue_field("windows[0].from") == "windows"
    assert queue_field("scopes.env") == "scopes" and queue_field("secret_sauce") == "__all__"
    form = QueueForm({"name": "q", "overflow": "wait"})
    assert form.is_valid()
    errors_to_form(form, {"timing.ttl_ms": "too short", "nonsense": "odd"}, queue_field)
    assert form.errors["ttl_ms"] == ["too short"]
    assert form.non_field_errors() == ["nonsense: odd"]


def test_a_rule_form_keeps_every_field_of_its_rule() -> None:
    # deliberate: every field of a rule, one keyword a line (data, alike in shape only).
    spec = RuleSpec(
        name="big",
        kind="payment.*",
        target="prod-*",
        when="payload.amount_cents > 50000",
        decision="require_approval",
        note="four figures",
        decide_within_ms=600_000,
        on_timeout="approve",
    )
    form = RuleForm(RuleForm.initial_from(spec))
    assert form.is_valid(), form.errors
    assert form.spec() == spec
    bare = RuleForm({"name": " r ", "kind": "*", "target": "*", "decision": "allow"})
    assert bare.is_valid() and bare.spec().on_timeout == "reject" and bare.spec().name == "r"


def test_the_notify_form_never_shows_a_secret_and_keeps_blank_secrets_blank() -> None:
    notify = {
        "webhooks": [{"url": "https://hooks.example/a", "secret": "s3cret"}],
        "emails": ["ops@example.com"],
        "kinds": ["expired"],
        "approvals": {
            "approvers": ["abe"],
            "webhooks": [{"url": "https://hooks.example/b", "secret": "hidden"}],
            "rules": {"big": {"webhooks": [{"url": "https://hooks.example/c", "secret": "x"}]}},
        },
    }
    initial = NotifyForm.initial_from(notify)
    assert (
        "s3cret" not in str(initial) and "hidden" not in str(initial) and "'x'" not in str(initial)
    )
    form = NotifyForm(
        {**initial, "webhooks": initial["webhooks"] + "\nhttps://hooks.example/d new"}
    )
    assert form.is_valid(), form.errors
    values = form.values()
    assert values["webhooks"] == [
        {"url": "https://hooks.example/a", "secret": ""},  # blank: the current one stays
        {"url": "https://hooks.example/d", "secret": "new"},
    ]
    assert values["emails"] == ["ops@example.com"] and values["kinds"] == ["expired"]
    assert values["approvals"]["rules"]["big"]["webhooks"] == [{"url": "https://hooks.example/c"}]
    bad = NotifyForm({"approvals": "approvers = ["})
    assert not bad.is_valid() and bad.errors["approvals"][0].startswith("not TOML")


def test_the_explain_form_takes_a_json_object_only() -> None:
    ok = ExplainForm({"kind": "payment.refund", "target": "o-1", "payload": ' {"a": 1} '})
    assert ok.is_valid() and ok.cleaned_data["payload"] == {"a": 1}
    empty = ExplainForm({"kind": "k", "target": "t", "payload": ""})
    assert empty.is_valid() and empty.cleaned_data["payload"] == {}
    for raw, message in (
        ("[1]", "a JSON object"),
        ("{nope", "not JSON"),
        ("[" * 100_000, "not JSON"),
    ):
        form = ExplainForm({"kind": "k", "target": "t", "payload": raw})
        assert not form.is_valid() and form.errors["payload"][0].startswith(message)


def test_roles_for_named_queues_are_written_role_colon_queue() -> None:
    form = PersonForm(
        {
            "username": "olga",
            "roles": ["operator"],
            "scopes": "operator:payments, approver:refunds operator:eu",
        }
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["scopes"] == {"operator": ["payments", "eu"], "approver": ["refunds"]}
    assert PersonForm({"username": "o", "roles": ["operator"], "scopes": " "}).is_valid()
    bad = PersonForm({"username": "o", "roles": ["operator"], "scopes": "operator payments:"})
    assert not bad.is_valid() and "write role:queue" in bad.errors["scopes"][0]


def test_an_agents_queues_are_offered_from_the_names_given() -> None:
    form = QueueScopeForm({"queues": ["a"]}, queue_names=["a", "b"])
    assert form.is_valid() and form.cleaned_data["queues"] == ["a"]
    assert not QueueScopeForm({"queues": ["c"]}, queue_names=["a", "b"]).is_valid()
