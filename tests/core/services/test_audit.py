"""The audit log: append-only (database triggers), tamper-evident against whoever runs the
database (a keyed chain and signed checkpoints outside it), and administration audited.

PostgreSQL tests use the test database; the SQLite tests run manage.py in subprocesses on
a temporary SQLite database, then tamper with it through sqlite3."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from leaseboard.core.models import AuditEntry, AuditHead, Executor
from leaseboard.core.models.audit import AuditKeyring, audit_key_id
from leaseboard.core.services.audit import audit_checkpoint, audit_record, audit_verify
from leaseboard.core.services.executors import executor_for_token
from tests.builders import PASSWORD, make_user
from tests.security import tamper
from tests.security.embedded import manage, production_check, sqlite_owner, sqlite_path

KEY_A = "audit-key-A-" + "a" * 40
KEY_B = "audit-key-B-" + "b" * 40


@pytest.fixture(autouse=True)
def _own_checkpoints(settings, tmp_path):
    # Each test has its own store outside the (rolled-back) database.
    settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR = tmp_path / "checkpoints"


def verify(capsys) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
    try:
        call_command("verify_audit")
        ok = True
    except CommandError:
        ok = False
    captured = capsys.readouterr()
    return ok, captured.out + captured.err


@contextlib.contextmanager
def triggers_off():  # type: ignore[no-untyped-def]
    """What the table's owner can do: switch the append-only triggers off."""
    with connection.cursor() as cur:
        # Run the deferred foreign-key checks of this test's writes first (ALTER needs it).
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute("ALTER TABLE core_auditentry DISABLE TRIGGER USER")
        try:
            yield cur
        finally:
            cur.execute("ALTER TABLE core_auditentry ENABLE TRIGGER USER")


# Each kind of tampering, and what verify_audit says of it, on either database.
ATTACKS = [
    ("none", None),
    ("edit", "seq 3: content does not match its MAC"),
    ("rehash_sha256", "seq 1: content does not match its MAC"),
    ("rehash_other_key", "seq 1: content does not match its MAC"),
    ("delete_tail", "the log ends at seq 3, before checkpoint"),
    ("truncate", "the log is empty, but checkpoint"),
]


def five_entries(agent) -> None:  # type: ignore[no-untyped-def]
    for i in range(5):
        agent(f"a{i}")


# --- PostgreSQL: the keyed chain and checkpoints -----------------------------------------


@pytest.mark.parametrize("attack,expected", ATTACKS)
@pytest.mark.postgres
@pytest.mark.django_db
def test_each_kind_of_tampering_is_detected_on_postgresql(agent, capsys, attack, expected):
    five_entries(agent)
    call_command("audit_checkpoint")
    capsys.readouterr()
    with triggers_off() as cur:
        if attack == "edit":
            tamper.edit_reason(cur, 3)
        elif attack == "rehash_sha256":
            tamper.edit_reason(cur, 3)
            tamper.rehash_chain(cur, mac=tamper.sha256_mac)
        elif attack == "rehash_other_key":
            tamper.edit_reason(cur, 3)
            tamper.rehash_chain(cur, mac=tamper.attacker_hmac)
        elif attack == "delete_tail":
            tamper.delete_tail(cur, keep=3)
        elif attack == "truncate":
            cur.execute("TRUNCATE core_auditentry")
    ok, output = verify(capsys)
    if expected is None:
        assert ok, output
        assert "audit chain intact: 5 entries; newest checkpoint seq 5" in output
    else:
        assert not ok
        assert expected in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_append_only_triggers_refuse_update_delete_and_truncate(agent):
    five_entries(agent)
    for sql in (
        "UPDATE core_auditentry SET reason = 'edited' WHERE seq = 3",
        "DELETE FROM core_auditentry WHERE seq = 5",
        "TRUNCATE core_auditentry",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            with connection.cursor() as cur:
                # The test run's connections may TRUNCATE (Django's flush); production's not.
                cur.execute("SET LOCAL leaseboard.audit_truncate = ''")
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                cur.execute(sql)
    assert AuditEntry.objects.count() == 5


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_superuser_edit_with_triggers_off_is_still_caught(agent, capsys):
    five_entries(agent)
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")  # superuser: triggers off
        tamper.edit_reason(cur, 3)
        cur.execute("SET session_replication_role = origin")
    ok, output = verify(capsys)
    assert not ok and "seq 3: content does not match its MAC" in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_checkpoints_grow_with_the_chain_and_are_skipped_when_nothing_changed(agent, capsys):
    call_command("audit_checkpoint")
    assert "the audit log is empty" in capsys.readouterr().out
    five_entries(agent)
    call_command("audit_checkpoint")
    call_command("audit_checkpoint")
    agent("late")
    call_command("audit_checkpoint")
    out = capsys.readouterr().out
    assert "checkpoint written: seq 5, 5 entries" in out
    assert "no new entries since seq 5" in out
    assert "checkpoint written: seq 6, 6 entries" in out
    lines = [
        json.loads(line)
        for path in sorted(Path(audit_checkpoint_dir()).glob("checkpoints-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert [(cp["seq"], cp["count"]) for cp in lines] == [(5, 5), (6, 6)]
    assert all(
        set(cp) == {"v", "seq", "head", "count", "at_ms", "at", "key_id", "mac"} for cp in lines
    )
    assert lines[1]["head"] == AuditEntry.objects.get(seq=6).hash


def audit_checkpoint_dir() -> Path:
    from django.conf import settings

    return Path(settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_broken_chain_is_never_signed(agent, capsys):
    five_entries(agent)
    call_command("audit_checkpoint")
    agent("six")
    with triggers_off() as cur:
        tamper.edit_reason(cur, 6)
    with pytest.raises(CommandError):
        call_command("audit_checkpoint")
    assert "seq 6: content does not match its MAC" in capsys.readouterr().err
    lines = "".join(p.read_text() for p in audit_checkpoint_dir().glob("*.jsonl")).splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["seq"] == 5


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_forged_or_edited_checkpoint_line_fails_verification(agent, capsys):
    five_entries(agent)
    call_command("audit_checkpoint")
    path = next(audit_checkpoint_dir().glob("checkpoints-*.jsonl"))
    real = json.loads(path.read_text().splitlines()[0])
    # Raise the recorded seq without the key: the signature no longer matches.
    forged = {**real, "seq": 50, "count": 50}
    with path.open("a") as fh:
        fh.write(json.dumps(forged) + "\n")
        fh.write("not json at all\n")
        fh.write(json.dumps({**real, "key_id": "0123456789abcdef"}) + "\n")
    ok, output = verify(capsys)
    assert not ok
    assert ":2: signature does not match (forged or edited checkpoint)" in output
    assert ":3: not a checkpoint" in output
    assert ":4: signed with unknown audit key id '0123456789abcdef'" in output
    # The forged line is not believed: the chain itself is judged by the genuine checkpoint.
    assert "before checkpoint" not in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_rotated_key_verifies_old_entries_only_while_it_is_configured(agent, settings, capsys):
    settings.LEASEBOARD_AUDIT_KEY, settings.LEASEBOARD_AUDIT_RETIRED_KEYS = KEY_A, ()
    agent("under-a")
    call_command("audit_checkpoint")
    settings.LEASEBOARD_AUDIT_KEY, settings.LEASEBOARD_AUDIT_RETIRED_KEYS = KEY_B, (KEY_A,)
    agent("under-b")
    call_command("audit_checkpoint")
    assert list(AuditEntry.objects.order_by("seq").values_list("key_id", flat=True)) == [
        audit_key_id(KEY_A),
        audit_key_id(KEY_B),
    ]
    capsys.readouterr()
    ok, output = verify(capsys)
    assert ok, output
    settings.LEASEBOARD_AUDIT_RETIRED_KEYS = ()
    ok, output = verify(capsys)
    assert not ok
    assert f"seq 1: made with unknown audit key id {audit_key_id(KEY_A)!r}" in output
    assert "signed with unknown audit key id" in output  # the first checkpoint, too


@pytest.mark.postgres
@pytest.mark.django_db
def test_an_unkeyed_entry_after_the_keyed_chain_began_is_refused(agent, capsys):
    five_entries(agent)
    head = AuditHead.objects.get(id=1)
    # deliberate: an entry's fields, one keyword a line, as audit_record takes them below.
    legacy = AuditEntry(
        seq=6,
        at_ms=1,
        actor_name="mallory",
        actor_role="admin",
        action="agent.create",
        object_type="executor",
        object_id="1",
        prev_hash=head.last_hash,
    )
    legacy.hash = legacy.compute_hash()  # plain SHA-256, as before the keyed chain
    legacy.save()
    AuditHead.objects.filter(id=1).update(seq=6, last_hash=legacy.hash)
    ok, output = verify(capsys)
    assert not ok and "seq 6: unkeyed entry after the keyed chain began" in output


def _legacy_entries(n: int) -> None:
    prev = "0" * 64
    for seq in range(1, n + 1):
        entry = AuditEntry(
            seq=seq,
            at_ms=seq,
            actor_name="cli",
            actor_role="admin",
            action="agent.create",
            object_type="executor",
            object_id=str(seq),
            prev_hash=prev,
        )
        entry.hash = entry.compute_hash()
        entry.save()
        prev = entry.hash
    AuditHead.objects.update_or_create(id=1, defaults={"seq": n, "last_hash": prev})


MIGRATION = "leaseboard.core.migrations.0004_audit_keyed_chain_and_truncate_guard"


@pytest.mark.postgres
@pytest.mark.django_db
def test_entries_from_before_the_keyed_chain_are_anchored_and_protected_by_it(agent, capsys):
    from django.apps import apps

    _legacy_entries(3)
    ok, output = verify(capsys)
    assert not ok and "3 unkeyed entries and no keyed anchor after them" in output
    anchor = importlib.import_module(MIGRATION).anchor_unkeyed_entries
    anchor(apps, SimpleNamespace(connection=connection))
    agent("after")
    ok, output = verify(capsys)
    assert ok, output
    assert AuditEntry.objects.get(seq=4).action == "audit.anchor"
    assert AuditEntry.objects.get(seq=4).after["unkeyed_entries"] == 3
    # Re-hashing the old SHA-256 part consistently breaks the keyed anchor's link.
    with triggers_off() as cur:
        tamper.edit_reason(cur, 2)
        prev = "0" * 64
        for row in tamper.audit_rows(cur)[:3]:
            row["prev_hash"] = prev
            new = tamper.sha256_mac(tamper.entry_body(row))
            cur.execute(
                "UPDATE core_auditentry SET prev_hash = %s, hash = %s WHERE seq = %s",
                [prev, new, row["seq"]],
            )
            prev = new
    ok, output = verify(capsys)
    assert not ok and "seq 4: prev_hash does not match the previous entry" in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_anchor_may_not_be_skipped(capsys):
    _legacy_entries(2)
    with transaction.atomic():
        # deliberate: an entry's fields, as the unkeyed AuditEntry rows above, through the writer.
        audit_record(
            at_ms=1,
            actor_name="x",
            actor_role="admin",
            action="agent.create",
            object_type="executor",
            object_id="1",
        )
    ok, output = verify(capsys)
    assert not ok and "seq 3: the first keyed entry after 2 unkeyed ones is not" in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_beat_runs_the_checkpoint_task(agent, settings):
    from leaseboard.celery import app
    from leaseboard.core.tasks import audit_checkpoint as task

    entry = settings.CELERY_BEAT_SCHEDULE["audit-checkpoint"]
    assert entry["task"] == "leaseboard.core.tasks.audit_checkpoint"
    assert entry["schedule"] == settings.LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks
    agent("one")
    assert task() == "checkpoint seq 1"
    assert audit_verify().newest is not None


@pytest.mark.postgres
@pytest.mark.django_db
def test_audit_checkpoint_service_reports_a_truncated_log_without_signing():
    # (service level, no command) the newest checkpoint says 2; the log is now empty.
    with transaction.atomic():
        for i in range(2):
            audit_record(
                at_ms=i,
                actor_name="x",
                actor_role="admin",
                action="t",
                object_type="t",
                object_id=str(i),
            )
    assert audit_checkpoint().written is not None
    with triggers_off() as cur:
        cur.execute("DELETE FROM core_auditentry")
    result = audit_checkpoint()
    assert result.written is None
    assert any("the log is empty, but checkpoint" in p for p in result.problems)


# --- Settings ---------------------------------------------------------------------------


def _settings_check(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    # Unlike `outside_env`, the rest of LEASEBOARD_* and the database variables are kept.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEASEBOARD_AUDIT", "PYTEST", "DJANGO_")) and k != "LEASEBOARD_TESTING"
    }
    return production_check(tmp_path, env, **extra)


def test_without_debug_start_up_fails_naming_the_audit_key_variable(tmp_path):
    result = _settings_check(tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/x")
    assert result.returncode != 0
    assert "LEASEBOARD_AUDIT_KEY (or LEASEBOARD_AUDIT_KEY_FILE) is required" in result.stderr
    assert not (tmp_path / "audit-key").exists()  # never generated in production
    short = _settings_check(
        tmp_path, DATABASE_URL="postgres://postgres@127.0.0.1:5432/x", LEASEBOARD_AUDIT_KEY="short"
    )
    assert (
        short.returncode != 0 and "LEASEBOARD_AUDIT_KEY: an audit key is at least" in short.stderr
    )


def test_the_embedded_sqlite_mode_generates_its_key_beside_the_database(tmp_path):
    # Zero configuration (README) keeps working with DEBUG off: the key is generated into
    # the data directory, next to the SQLite file it protects.
    result = _settings_check(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path}/db.sqlite3")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "audit-key").read_text().strip()) >= 32


def test_a_key_file_gives_the_current_and_retired_keys(tmp_path):
    from leaseboard.settings import keys as leaseboard_settings

    path = tmp_path / "keys"
    path.write_text(f"# current first\n{KEY_B}\n{KEY_A}\n")
    env = {"LEASEBOARD_AUDIT_KEY_FILE": str(path)}
    old = {k: os.environ.get(k) for k in ("LEASEBOARD_AUDIT_KEY_FILE", "LEASEBOARD_AUDIT_KEY")}
    try:
        os.environ.pop("LEASEBOARD_AUDIT_KEY", None)
        os.environ.update(env)
        current, retired = leaseboard_settings._audit_keys()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert (current, retired) == (KEY_B, (KEY_A,))
    keyring = AuditKeyring(current, retired)
    assert keyring.current_id == audit_key_id(KEY_B) and set(keyring.keys) == {
        audit_key_id(KEY_A),
        audit_key_id(KEY_B),
    }


# --- Administration is audited ----------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_create_agent_prints_a_token_once_and_stores_only_its_hash(capsys):
    call_command("create_agent", "printer", "--queue", "default")
    token = capsys.readouterr().out.strip()
    executor = Executor.objects.get(name="printer")
    assert token.startswith("lb_") and token not in (executor.token_hash or "")
    assert AuditEntry.objects.filter(action="agent.create", object_id=str(executor.id)).exists()
    with pytest.raises(CommandError):
        call_command("create_agent", "printer", "--queue", "default")


@pytest.mark.postgres
@pytest.mark.django_db
def test_create_agent_needs_its_queues_or_every_queue_said_explicitly(capsys):
    with pytest.raises(CommandError, match="--queue|--all-queues"):
        call_command("create_agent", "nowhere")
    with pytest.raises(CommandError, match="no queue 'nope'"):
        call_command("create_agent", "nowhere", "--queue", "nope")
    assert not Executor.objects.filter(name="nowhere").exists()
    call_command("create_agent", "scoped", "--queue", "default")
    call_command("create_agent", "everywhere", "--all-queues")
    scoped, everywhere = (Executor.objects.get(name=n) for n in ("scoped", "everywhere"))
    assert (scoped.queues, scoped.all_queues) == (["default"], False)
    assert (everywhere.queues, everywhere.all_queues) == ([], True)
    created = AuditEntry.objects.get(action="agent.create", object_id=str(scoped.id))
    assert created.after["queues"] == ["default"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_management_commands_audit_their_actor_as_cli_and_the_os_user(capsys):
    import getpass

    expected = f"cli:{getpass.getuser()}"
    call_command("create_agent", "by-cli", "--queue", "default")
    call_command("agent_queues", "by-cli", "--all-queues")
    call_command("agent_token", "rotate", "by-cli")
    call_command("create_recipient", "by-cli-recipient")
    actors = dict(
        AuditEntry.objects.filter(
            action__in=[
                "agent.create",
                "agent.scope_change",
                "agent.token_rotate",
                "recipient.create",
            ]
        ).values_list("action", "actor_name")
    )
    assert actors == {
        "agent.create": expected,
        "agent.scope_change": expected,
        "agent.token_rotate": expected,
        "recipient.create": expected,
    }


@pytest.mark.postgres
@pytest.mark.django_db
def test_rotating_an_agent_token_retires_the_old_one_at_once_in_this_process(
    agent, capsys, django_capture_on_commit_callbacks
):
    executor, old = agent("rotor")
    assert executor_for_token(old) == executor  # now cached in this process
    capsys.readouterr()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("agent_token", "rotate", "rotor")
    captured = capsys.readouterr()
    new = captured.out.strip()
    assert new.startswith("lb_") and new != old and "shown only once" in captured.err
    assert executor_for_token(old) is None
    assert executor_for_token(new) == executor
    entry = AuditEntry.objects.get(action="agent.token_rotate")
    assert (entry.object_id, entry.actor_role) == (str(executor.id), "admin")
    assert entry.actor_name.startswith("cli") and new not in json.dumps(entry.after)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_revoked_agent_token_is_refused_and_rotation_restores_access(
    agent, api, capsys, django_capture_on_commit_callbacks
):
    executor, token = agent("revokee")
    assert api.get("/api/v1/work-items/none", token=token).status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        call_command("agent_token", "revoke", "revokee")
    assert "token revoked" in capsys.readouterr().out
    assert executor_for_token(token) is None
    assert api.get("/api/v1/work-items/none", token=token).status_code == 401
    call_command("agent_token", "revoke", "revokee")
    assert "nothing to revoke" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action="agent.token_revoke").count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        call_command("agent_token", "rotate", "revokee")
    fresh = capsys.readouterr().out.strip()
    assert executor_for_token(fresh) == executor
    with pytest.raises(CommandError, match="no agent named 'nobody'"):
        call_command("agent_token", "rotate", "nobody")


@pytest.mark.postgres
@pytest.mark.django_db
def test_create_user_validates_the_password_and_audits_the_creation(capsys):
    with pytest.raises(CommandError, match="too short"):
        call_command("create_user", "weak", "--role", "operator", "--password", "a")
    with pytest.raises(CommandError, match="too similar to the username"):
        call_command("create_user", "tremendous", "--role", "operator", "--password", "tremendous1")
    with pytest.raises(CommandError, match="entirely numeric"):
        call_command("create_user", "num", "--role", "operator", "--password", "8" * 14)
    assert not AuditEntry.objects.exists()
    call_command("create_user", "carol", "--role", "approver", "--password", PASSWORD)
    entry = AuditEntry.objects.get(action="user.create")
    assert entry.after == {
        "username": "carol",
        "roles": ["approver"],
        "break_glass": False,
        "active": True,
    }
    assert PASSWORD not in json.dumps(entry.after) + entry.reason


@pytest.mark.postgres
@pytest.mark.django_db
def test_create_user_refuses_an_existing_user_instead_of_adding_a_role(capsys):
    make_user("olga", "operator")
    with pytest.raises(CommandError, match="already exists; change roles with"):
        call_command("create_user", "olga", "--role", "manager", "--password", PASSWORD)
    from django.contrib.auth.models import User

    assert list(User.objects.get(username="olga").groups.values_list("name", flat=True)) == [
        "operator"
    ]
    assert not AuditEntry.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_role_changes_are_explicit_and_audited(capsys):
    make_user("abe", "operator")
    call_command("user_role", "abe", "--add", "approver", "--remove", "operator", "--reason", "r")
    assert "roles operator -> approver" in capsys.readouterr().out
    entry = AuditEntry.objects.get(action="user.update")
    assert entry.before["roles"] == ["operator"] and entry.after["roles"] == ["approver"]
    assert entry.reason == "r" and entry.actor_role == "admin"
    assert entry.actor_name.startswith("cli:")
    call_command("user_role", "abe", "--add", "approver")
    assert "roles unchanged: approver" in capsys.readouterr().out
    assert AuditEntry.objects.filter(action="user.update").count() == 1
    with pytest.raises(CommandError, match="no user 'ghost'"):
        call_command("user_role", "ghost", "--add", "manager")
    with pytest.raises(CommandError, match="both added and removed"):
        call_command("user_role", "abe", "--add", "manager", "--remove", "manager")


@pytest.mark.postgres
@pytest.mark.django_db
def test_sign_in_failures_and_lock_outs_are_audited(client):
    make_user("erin", "operator")
    response = client.post("/login/", {"username": "erin", "password": "wrong-password"})
    assert response.status_code == 200  # the form again, with an error
    entry = AuditEntry.objects.get(action="auth.sign_in_failed")
    assert (entry.object_id, entry.actor_role, entry.after) == (
        "erin",
        "anonymous",
        {"ip": "127.0.0.1"},
    )
    assert "wrong-password" not in json.dumps(entry.after)
    assert client.post("/login/", {"username": "erin", "password": PASSWORD}).status_code == 302
    assert AuditEntry.objects.filter(action="auth.sign_in_failed").count() == 1

    from leaseboard.core.services.signin_audit import audit_locked_out, on_axes_locked_out

    audit_locked_out(username="erin", ip_address="10.0.0.9")
    on_axes_locked_out(sender=None, request=None, username="mallory", ip_address="10.0.0.8")
    assert list(
        AuditEntry.objects.filter(action="auth.locked_out")
        .order_by("seq")
        .values_list("object_id", "after")
    ) == [("erin", {"ip": "10.0.0.9"}), ("mallory", {"ip": "10.0.0.8"})]


# --- SQLite: the same attacks on a real SQLite database ---------------------------------


MAKE_ENTRIES = (
    "from leaseboard.core.services.executors import agent_create\n"
    "for i in range(5): agent_create(name=f'agent-{i}', all_queues=True, actor_name='t')\n"
)


@pytest.fixture(scope="module")
def sqlite_base(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("sqlite-audit") / "data"
    for args in (
        ("migrate", "--noinput", "-v", "0"),
        ("shell", "-c", MAKE_ENTRIES),
        ("audit_checkpoint",),
    ):
        result = manage(data, *args)
        assert result.returncode == 0, result.stderr
    return data


@pytest.fixture
def sqlite_copy(sqlite_base, tmp_path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(sqlite_base, data)
    return data


@pytest.mark.parametrize("attack,expected", ATTACKS)
def test_each_kind_of_tampering_is_detected_on_sqlite(sqlite_copy, attack, expected):
    db = sqlite3.connect(sqlite_path(sqlite_copy))
    triggers = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    db.close()
    assert {"core_auditentry_no_update", "core_auditentry_no_delete"} <= triggers
    if attack != "none":
        with sqlite_owner(sqlite_copy) as cur:
            if attack == "edit":
                tamper.edit_reason(cur, 3, ph="?")
            elif attack in {"rehash_sha256", "rehash_other_key"}:
                tamper.edit_reason(cur, 3, ph="?")
                mac = tamper.sha256_mac if attack == "rehash_sha256" else tamper.attacker_hmac
                tamper.rehash_chain(cur, ph="?", mac=mac)
            elif attack == "delete_tail":
                tamper.delete_tail(cur, keep=3, ph="?")
            elif attack == "truncate":
                cur.execute("DELETE FROM core_auditentry")  # SQLite's TRUNCATE
    result = manage(sqlite_copy, "verify_audit")
    if expected is None:
        assert result.returncode == 0, result.stderr
        assert "audit chain intact: 5 entries; newest checkpoint seq 5" in result.stdout
    else:
        assert result.returncode != 0, result.stdout
        assert expected in result.stderr


def test_sqlite_migration_anchors_an_unkeyed_log_and_keeps_its_triggers(tmp_path):
    data = tmp_path / "data"
    assert manage(data, "migrate", "core", "0003", "--noinput", "-v", "0").returncode == 0
    db = sqlite3.connect(sqlite_path(data))
    prev = "0" * 64
    for seq in (1, 2):
        row = {
            "seq": seq,
            "at_ms": seq,
            "actor_user_id": None,
            "actor_name": "cli",
            "actor_role": "admin",
            "action": "agent.create",
            "object_type": "executor",
            "object_id": str(seq),
            "work_item_id": None,
            "reason": "",
            "before": "{}",
            "after": "{}",
            "request_id": "",
            "prev_hash": prev,
        }
        row["hash"] = tamper.sha256_mac(tamper.entry_body(row))  # the pre-key SHA-256 chain
        db.execute(
            f"INSERT INTO core_auditentry ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            list(row.values()),
        )
        prev = row["hash"]
    db.execute("UPDATE core_audithead SET seq = 2, last_hash = ? WHERE id = 1", [prev])
    db.commit()
    db.close()
    migrated = manage(data, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    result = manage(data, "verify_audit")
    assert result.returncode == 0, result.stderr
    assert "audit chain intact: 3 entries" in result.stdout
    db = sqlite3.connect(sqlite_path(data))
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE core_auditentry SET reason = 'x' WHERE seq = 1")
        assert db.execute("SELECT action FROM core_auditentry WHERE seq = 3").fetchone() == (
            "audit.anchor",
        )
    finally:
        db.close()


# --- Checkpoints expected but missing ------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_verify_audit_fails_when_the_checkpoint_store_is_gone(settings, capsys):
    """The reproduction: with the checkpoint directory gone, verify_audit said "intact" and
    exited 0. The database remembers that a checkpoint was written; the store must have it."""
    import shutil

    from leaseboard.core.clock import db_now_ms

    for n in range(3):
        make_user(f"cp-{n}")
        with transaction.atomic():
            audit_record(
                at_ms=db_now_ms(), actor_name="t", actor_role="admin", action="t.x",
                object_type="t", object_id=str(n),
            )  # fmt: skip
    assert audit_checkpoint().written is not None
    assert verify(capsys)[0]
    shutil.rmtree(settings.LEASEBOARD_AUDIT_CHECKPOINT_DIR)
    ok, said = verify(capsys)
    assert not ok
    assert "was written at" in said and "removed, emptied or replaced" in said
    with pytest.raises(CommandError, match="--without-checkpoints"):
        call_command("verify_audit")
    # Asked explicitly, it verifies the chain alone, and says what that cannot detect.
    call_command("verify_audit", "--without-checkpoints")
    captured = capsys.readouterr()
    assert "audit chain intact" in captured.out and "cannot be detected now" in captured.err


@pytest.mark.postgres
@pytest.mark.django_db
def test_verify_audit_fails_when_old_entries_are_covered_by_no_checkpoint(db_clock, capsys):
    """Checkpointing stopped (or the store went, and the database's note of it with it):
    entries older than the grace are covered by none."""
    from leaseboard.core.clock import db_now_ms

    with transaction.atomic():
        audit_record(
            at_ms=db_now_ms(), actor_name="t", actor_role="admin", action="t.x",
            object_type="t", object_id="1",
        )  # fmt: skip
    assert verify(capsys)[0]  # a young log: not yet expected
    db_clock.advance(11 * 60 * 1000)  # past two 300 s intervals and a minute
    ok, said = verify(capsys)
    assert not ok and "covered by no checkpoint" in said
    audit_checkpoint()
    assert verify(capsys)[0]
