"""Decisions as spans, and the trace id a record keeps: with a tracer provider installed each
decision is a `leaseboard.*` span carrying what was decided and why; with none (the
default) nothing is traced and records keep no trace id."""

from __future__ import annotations

import pytest
from django.db import connection

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Effect
from leaseboard.core.services.audit import audit_verify
from leaseboard.core.services.leases import lease_acquire, lease_renew, lease_revoke
from leaseboard.core.tracing import current_trace_id, tracing_on
from leaseboard.domain.errors import WorkLeased
from leaseboard.domain.policy import RuleSpec
from tests.builders import effect_rules, effect_under, make_user
from tests.otel import in_memory_tracing, named

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def propose(scene, key: str = "fx-1") -> Effect:  # type: ignore[no-untyped-def]
    return effect_under(scene.lease, scene.agent, key, payload={"amount": 5})


def test_each_decision_is_a_span_with_the_leaseboard_attributes(scene, agent) -> None:  # type: ignore[no-untyped-def]
    other, _ = agent()
    effect_rules(
        scene.lease.work_item.queue,
        RuleSpec(name="refunds-reviewed", kind="payment.*", decision="require_approval"),
    )
    with in_memory_tracing() as (_, exporter):
        with pytest.raises(WorkLeased):
            lease_acquire(work_key=scene.key, executor=other)
        lease_renew(lease_id=scene.lease.id, executor=scene.agent, epoch=scene.lease.epoch)
        held = propose(scene)
        [acquire] = named(exporter, "leaseboard.lease.acquire")
        [renew] = named(exporter, "leaseboard.lease.renew")
        [proposal] = named(exporter, "leaseboard.effect.propose")
    assert dict(acquire.attributes or {}) == {
        "leaseboard.work_key": scene.key,
        "leaseboard.decision": "refused",
        "leaseboard.code": "work_leased",
    }
    assert renew.attributes is not None and proposal.attributes is not None
    assert (renew.attributes["leaseboard.decision"], renew.attributes["leaseboard.epoch"]) == (
        "renewed",
        scene.lease.epoch,
    )
    assert (
        dict(proposal.attributes).items()
        >= {
            "leaseboard.work_key": scene.key,
            "leaseboard.epoch": scene.lease.epoch,
            "leaseboard.decision": "pending_approval",
            "leaseboard.policy_rule": "refunds-reviewed",
            "leaseboard.effect_id": str(held.id),
        }.items()
    )
    # The effect keeps the trace id of the span it was decided in.
    assert Effect.objects.get(id=held.id).trace_id == f"{proposal.context.trace_id:032x}"


def test_an_audit_entry_keeps_its_trace_id_under_the_chains_mac(scene) -> None:  # type: ignore[no-untyped-def]
    operator = Actor.human(make_user("olga-traced", "operator"))
    with in_memory_tracing() as (provider, exporter):
        with provider.get_tracer("test").start_as_current_span("operator request") as span:
            lease_revoke(
                lease_id=scene.lease.id,
                actor=operator,
                reason_category="stuck",
                reason_text="loops on one refund",
            )
            expected = current_trace_id()
        [revoke] = named(exporter, "leaseboard.lease.revoke")
    assert expected == f"{span.get_span_context().trace_id:032x}"
    assert revoke.attributes is not None and revoke.attributes["leaseboard.decision"] == "revoked"
    entry = AuditEntry.objects.get(action="lease.revoke")
    assert entry.trace_id == expected
    assert audit_verify().intact
    # The MAC covers it: a trace id changed in the database breaks the chain.
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")  # superuser: triggers off
        cursor.execute(
            "UPDATE core_auditentry SET trace_id = %s WHERE id = %s", ["0" * 32, entry.id]
        )
        cursor.execute("SET session_replication_role = origin")
    assert not audit_verify().intact


def test_with_tracing_off_nothing_is_traced_and_no_trace_id_is_kept(scene) -> None:  # type: ignore[no-untyped-def]
    assert not tracing_on()
    effect = propose(scene, "untraced")
    assert Effect.objects.get(id=effect.id).trace_id == ""
    assert current_trace_id() == ""
