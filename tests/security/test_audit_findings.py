"""Security review findings on the audit log and credentials, replayed as they were
reported. Each test failed on the code the review looked at (a plain SHA-256 chain,
`create_user` adding roles silently, no token rotation or revocation)."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from leaseboard.core.models import AuditEntry
from leaseboard.core.services.executors import executor_for_token
from tests.builders import PASSWORD, make_user
from tests.security import tamper
from tests.security.embedded import manage, sqlite_owner


@pytest.fixture(autouse=True)
def _own_checkpoints(settings, tmp_path):
    settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"


def verify_fails(capsys) -> str:  # type: ignore[no-untyped-def]
    """verify_audit must exit non-zero; returns what it said."""
    with pytest.raises(CommandError):
        call_command("verify_audit")
    captured = capsys.readouterr()
    return captured.out + captured.err


def owner_cursor():  # type: ignore[no-untyped-def]
    cur = connection.cursor()
    cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE needs no pending FK checks
    return cur


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_disable_trigger_edit_and_recompute_the_sha256_chain(agent, capsys):
    for i in range(4):
        agent(f"f{i}")
    with owner_cursor() as cur:
        cur.execute("ALTER TABLE core_auditentry DISABLE TRIGGER USER")
        tamper.edit_reason(cur, 2)
        tamper.rehash_chain(cur, mac=tamper.sha256_mac)  # chain and head, recomputed
        cur.execute("ALTER TABLE core_auditentry ENABLE TRIGGER USER")
    output = verify_fails(capsys)
    assert "content does not match its MAC" in output
    assert "audit chain intact" not in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_truncate_is_refused_by_a_trigger(agent):
    agent("t0")
    with pytest.raises(DatabaseError, match="TRUNCATE refused"), transaction.atomic():
        with owner_cursor() as cur:
            cur.execute("SET LOCAL leaseboard.audit_truncate = ''")  # as in production
            cur.execute("TRUNCATE core_auditentry")
    assert AuditEntry.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_truncate_past_the_trigger_is_not_an_intact_empty_log(agent, capsys):
    for i in range(3):
        agent(f"t{i}")
    call_command("audit_checkpoint")
    with owner_cursor() as cur:
        cur.execute("ALTER TABLE core_auditentry DISABLE TRIGGER USER")
        cur.execute("TRUNCATE core_auditentry")
        cur.execute("UPDATE core_audithead SET seq = 0, last_hash = %s", ["0" * 64])
        cur.execute("ALTER TABLE core_auditentry ENABLE TRIGGER USER")
    output = verify_fails(capsys)
    assert "audit chain intact: 0 entries" not in output
    assert "the log is empty, but checkpoint" in output and "(seq 3, 3 entries" in output


def test_finding_sqlite_drop_trigger_then_edit_and_recompute(tmp_path):
    data = tmp_path / "data"
    assert manage(data, "migrate", "--noinput", "-v", "0").returncode == 0
    for name in ("s1", "s2", "s3"):
        assert manage(data, "create_agent", name, "--all-queues").returncode == 0
    with sqlite_owner(data) as cur:
        tamper.edit_reason(cur, 2, ph="?")
        tamper.rehash_chain(cur, ph="?", mac=tamper.sha256_mac)
    result = manage(data, "verify_audit")
    assert result.returncode != 0, result.stdout
    assert "seq 1: content does not match its MAC" in result.stderr


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_create_user_accepts_the_password_a():
    with pytest.raises(CommandError, match="password refused: This password is too short"):
        call_command("create_user", "weakling", "--role", "operator", "--password", "a")
    from django.contrib.auth.models import User

    assert not User.objects.filter(username="weakling").exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_create_user_silently_adds_a_role_to_an_existing_user():
    user = make_user("olga", "operator")
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_user", "olga", "--role", "approver", "--password", PASSWORD)
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
    assert user.check_password(PASSWORD)


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_create_user_writes_no_audit_entry():
    call_command("create_user", "nina", "--role", "manager", "--password", PASSWORD)
    entry = AuditEntry.objects.get(action="user.create")
    assert entry.actor_role == "admin" and entry.after["roles"] == ["manager"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_no_command_rotates_or_revokes_an_agent_token(
    agent, capsys, django_capture_on_commit_callbacks
):
    executor, token = agent("leaky")
    assert executor_for_token(token) == executor
    with django_capture_on_commit_callbacks(execute=True):
        call_command("agent_token", "rotate", "leaky")
    rotated = capsys.readouterr().out.strip()
    assert executor_for_token(token) is None and executor_for_token(rotated) == executor
    with django_capture_on_commit_callbacks(execute=True):
        call_command("agent_token", "revoke", "leaky")
    assert executor_for_token(rotated) is None
    actions = list(AuditEntry.objects.order_by("seq").values_list("action", "after"))
    assert [a for a, _ in actions] == ["agent.create", "agent.token_rotate", "agent.token_revoke"]
    assert rotated not in json.dumps([after for _, after in actions])
