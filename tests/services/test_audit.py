"""The audit log: append-only (database trigger) and tamper-evident (hash chain)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from leaseboard.core.models import AuditEntry, Executor

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_create_agent_prints_a_token_once_and_stores_only_its_hash(capsys):
    call_command("create_agent", "printer")
    token = capsys.readouterr().out.strip()
    executor = Executor.objects.get(name="printer")
    assert token.startswith("lb_") and token not in (executor.token_hash or "")
    assert AuditEntry.objects.filter(action="agent.create", object_id=str(executor.id)).exists()
    with pytest.raises(CommandError):
        call_command("create_agent", "printer")


def test_the_chain_verifies_and_detects_an_edit(agent, capsys):
    for i in range(5):
        agent(f"a{i}")
    call_command("verify_audit")
    assert "intact: 5 entries" in capsys.readouterr().out
    with pytest.raises(DatabaseError), transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("UPDATE core_auditentry SET reason = 'edited' WHERE seq = 3")
    # Someone with superuser rights disables the trigger and edits a row: the chain says so.
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # superuser: triggers off
        cur.execute("UPDATE core_auditentry SET reason = 'edited' WHERE seq = 3")
        cur.execute("SET session_replication_role = origin")
    with pytest.raises(CommandError):
        call_command("verify_audit")
    assert "seq 3: content does not match its hash" in capsys.readouterr().err
