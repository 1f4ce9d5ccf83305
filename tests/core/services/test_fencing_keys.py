"""Fencing signing keys: sealed at rest, rotated with a publish delay, retired with an
overlap until their tokens expire, all on the database clock; `manage.py fencing_keys`;
and the migration that seals the keys stored in plaintext before it."""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, migrations
from django.db.migrations.executor import MigrationExecutor

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import AuditEntry, FencingKey
from leaseboard.core.models.leases import FencingKeyring, FencingKeyUnavailable, fencing_kek_id
from leaseboard.core.services import fencing as keys
from leaseboard.domain import fencing
from leaseboard.domain.errors import ValidationFailed
from tests.security.embedded import manage, sqlite_path, sqlite_rows
from tests.security.test_fencing_key_findings import private_keys_in_clear, raw_fencing_key_rows

DELAY_MS = 60_000
KEK_A = "A" * 40
KEK_B = "B" * 40

pytestmark = [pytest.mark.postgres]
_seq = itertools.count(1)


@pytest.fixture(autouse=True)
def _publish_delay(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_FENCING_KEY_PUBLISH_DELAY_MS = DELAY_MS


@pytest.fixture
def commit(django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    """Run a service and its after-commit callbacks (the cache forget), as a commit would."""

    def run(fn, **kw):  # type: ignore[no-untyped-def]
        with django_capture_on_commit_callbacks(execute=True):
            return fn(**kw)

    return run


def kid_of(token: str) -> str:
    claims = fencing.unverified_claims(token)
    assert claims is not None
    return claims.kid


def token_for(agent) -> str:  # type: ignore[no-untyped-def]
    executor, _ = agent()
    return grant_token(executor)


def grant_token(executor, queue: str = "default", **timing: int) -> str:  # type: ignore[no-untyped-def]
    from leaseboard.core.services.leases import lease_acquire
    from tests.builders import admit

    key = f"fk-{next(_seq)}"
    admit(key, queue=queue, **timing)
    return lease_acquire(work_key=key, executor=executor).fencing_token


def verifies(token: str) -> str | None:
    """None if the published key set verifies the token now (database clock), else the code."""
    try:
        fencing.verify_token(token, public_keys=keys.fencing_public_keys(), now_ms=db_now_ms())
    except fencing.InvalidToken as exc:
        return exc.code
    return None


def states() -> dict[str, str]:
    _, listed = keys.fencing_keys_status()
    return {k.kid: k.state.value for k in listed}


def jwks_kids(api) -> set[str]:  # type: ignore[no-untyped-def]
    return set(fencing.public_keys_from_jwks(api.get("/api/v1/fencing/keys").json_body))


# --- At rest ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_table_holds_sealed_keys_that_open_only_with_their_kek_and_row(agent, settings):
    settings.LEASEBOARD_FENCING_KEK, settings.LEASEBOARD_FENCING_RETIRED_KEKS = KEK_A, ()
    token_for(agent)
    keys.fencing_key_rotate(publish_delay_ms=0)
    assert private_keys_in_clear(raw_fencing_key_rows()) == []
    first, second = FencingKey.objects.order_by("id")
    assert first.kek_id == second.kek_id == fencing_kek_id(KEK_A)
    private = FencingKeyring(KEK_A).open(
        first.private_key_sealed, kid=first.kid, kek_id=first.kek_id
    )
    assert fencing.public_key_raw(private) == bytes(first.public_key)
    with pytest.raises(FencingKeyUnavailable, match="not configured here"):
        FencingKeyring(KEK_B).open(first.private_key_sealed, kid=first.kid, kek_id=first.kek_id)
    with pytest.raises(FencingKeyUnavailable, match="does not open"):  # moved to another row
        FencingKeyring(KEK_A).open(first.private_key_sealed, kid=second.kid, kek_id=first.kek_id)


@pytest.mark.django_db
def test_after_a_kek_rotation_old_keys_open_with_the_retired_kek_and_new_ones_use_the_new(
    agent, settings, commit, capsys
):
    settings.LEASEBOARD_FENCING_KEK, settings.LEASEBOARD_FENCING_RETIRED_KEKS = KEK_A, ()
    old = kid_of(token_for(agent))
    settings.LEASEBOARD_FENCING_KEK, settings.LEASEBOARD_FENCING_RETIRED_KEKS = KEK_B, (KEK_A,)
    keys.fencing_keys_forget()
    assert kid_of(token_for(agent)) == old  # opened with the retired KEK
    new = commit(keys.fencing_key_rotate, publish_delay_ms=0)
    assert new.kek_id == fencing_kek_id(KEK_B)
    commit(keys.fencing_key_retire, kid=old)
    # Once the old KEK is dropped, only retired keys were sealed under it: all still works.
    settings.LEASEBOARD_FENCING_RETIRED_KEKS = ()
    keys.fencing_keys_forget()
    assert kid_of(token_for(agent)) == new.kid
    call_command("fencing_keys", "list")
    listed = capsys.readouterr().out
    assert f"(sealed under KEK {fencing_kek_id(KEK_A)}, not configured here)" in listed


@pytest.mark.django_db
def test_a_process_without_the_kek_of_the_newest_key_signs_with_one_it_can_open(agent, settings):
    settings.LEASEBOARD_FENCING_KEK = KEK_A
    old = kid_of(token_for(agent))
    settings.LEASEBOARD_FENCING_KEK = KEK_B
    keys.fencing_key_rotate(publish_delay_ms=0)
    settings.LEASEBOARD_FENCING_KEK = KEK_A  # a node not yet given the new KEK
    keys.fencing_keys_forget()
    assert kid_of(token_for(agent)) == old


# --- Rotation: published before it signs, activation on the database clock ---------------


@pytest.mark.django_db
def test_a_rotated_key_is_in_the_jwks_before_any_token_is_signed_by_it(
    agent, api, commit, db_clock
):
    old = kid_of(token_for(agent))
    new = commit(keys.fencing_key_rotate)
    assert jwks_kids(api) == {old, new.kid}
    assert states() == {old: "signing", new.kid: "pending"}
    # This process has the new key in its copy already, and still waits for activation.
    assert kid_of(token_for(agent)) == old
    db_clock.advance(DELAY_MS - 1000)
    assert kid_of(token_for(agent)) == old
    db_clock.advance(1000)
    assert kid_of(token_for(agent)) == new.kid
    assert states() == {old: "published", new.kid: "signing"}
    assert jwks_kids(api) == {old, new.kid}


@pytest.mark.django_db
def test_activation_is_read_from_the_database_clock_not_this_hosts(agent, commit, db_clock):
    db_clock.advance(-3 * 24 * 3600_000)  # the database is three days behind this host
    old = kid_of(token_for(agent))
    before = db_now_ms()
    new = commit(keys.fencing_key_rotate)
    assert before + DELAY_MS <= new.activate_at_ms <= db_now_ms() + DELAY_MS
    assert new.created_at_ms >= before
    # By this host's clock the new key activated days ago; by the database's, not yet.
    assert kid_of(token_for(agent)) == old


@pytest.mark.django_db
def test_the_first_key_signs_at_once_and_so_does_a_rotation_when_nothing_signs(agent):
    first = keys.fencing_key_rotate()  # an empty installation: nobody has met a token yet
    assert states() == {first.kid: "signing"}
    assert kid_of(token_for(agent)) == first.kid


# --- Retirement with overlap ------------------------------------------------------------


@pytest.mark.django_db
def test_a_token_signed_before_rotation_verifies_after_it_and_after_retirement_until_expiry(
    agent, commit, db_clock, settings
):
    executor, _ = agent()
    # A token that outlives the publish delay: it dies with its lease's expiry at issue, and
    # at most FENCING_TOKEN_TTL_MS after issue (docs/fencing.md), so both exceed the delay.
    settings.FENCING_TOKEN_TTL_MS = 4 * DELAY_MS
    token = grant_token(executor, ttl_ms=3 * DELAY_MS)
    old = kid_of(token)
    expires = fencing.unverified_claims(token).expires_at_ms  # type: ignore[union-attr]
    new = commit(keys.fencing_key_rotate)
    assert verifies(token) is None
    db_clock.advance(DELAY_MS)
    assert kid_of(token_for(agent)) == new.kid and verifies(token) is None
    retired = commit(keys.fencing_key_retire, kid=old)
    assert retired.publish_until_ms >= expires  # type: ignore[operator]
    assert states()[old] == "retiring" and kid_of(token_for(agent)) == new.kid
    assert verifies(token) is None
    db_clock.advance(expires - db_now_ms() - 1000)  # a second before the token expires
    assert verifies(token) is None and old in keys.fencing_public_keys()
    db_clock.advance(retired.publish_until_ms - db_now_ms())  # type: ignore[operator]
    assert old not in keys.fencing_public_keys() and states()[old] == "retired"
    assert verifies(token) in {"unknown_key", "expired"}


@pytest.mark.django_db
def test_a_work_item_with_a_longer_lifetime_than_the_default_keeps_its_key_published(
    agent, commit, settings, db_clock
):
    executor, _ = agent()
    from leaseboard.core.models import Queue

    long_life = settings.LEASE_DEFAULTS.max_lifetime_ms * 3
    # A work item may not outlive its queue's cap, so the queue allows the longer life.
    Queue.objects.create(name="long-life", timing={"max_lifetime_ms": long_life})
    token = grant_token(executor, queue="long-life", max_lifetime_ms=long_life)
    old = kid_of(token)
    commit(keys.fencing_key_rotate, publish_delay_ms=0)
    retired = commit(keys.fencing_key_retire, kid=old)
    expires = fencing.unverified_claims(token).expires_at_ms  # type: ignore[union-attr]
    assert retired.publish_until_ms >= expires  # type: ignore[operator]
    db_clock.advance(expires - db_now_ms() - 1000)
    assert verifies(token) is None


@pytest.mark.django_db
def test_retiring_the_signing_key_signs_the_next_token_with_the_other_key(agent, commit):
    older = kid_of(token_for(agent))
    newer = commit(keys.fencing_key_rotate, publish_delay_ms=0)
    assert kid_of(token_for(agent)) == newer.kid
    commit(keys.fencing_key_retire, kid=newer.kid)
    assert kid_of(token_for(agent)) == older
    assert states() == {older: "signing", newer.kid: "retiring"}


@pytest.mark.django_db
def test_the_only_key_that_can_sign_is_never_retired(agent, commit):
    only = kid_of(token_for(agent))
    with pytest.raises(ValidationFailed, match="only key that can sign now.*rotate"):
        keys.fencing_key_retire(kid=only)
    pending = commit(keys.fencing_key_rotate)
    with pytest.raises(ValidationFailed, match=f"once {pending.kid} activates, in 60 s"):
        keys.fencing_key_retire(kid=only, immediately=True)
    assert states() == {only: "signing", pending.kid: "pending"}
    assert not AuditEntry.objects.filter(action="fencing_key.retire").exists()


@pytest.mark.django_db
def test_a_pending_key_retired_before_it_could_sign_leaves_the_key_set_at_once(agent, commit):
    signing = kid_of(token_for(agent))
    pending = commit(keys.fencing_key_rotate)
    retired = commit(keys.fencing_key_retire, kid=pending.kid)
    assert retired.publish_until_ms == retired.retired_at_ms
    assert set(keys.fencing_public_keys()) == {signing}
    with pytest.raises(ValidationFailed, match="already retired"):
        keys.fencing_key_retire(kid=pending.kid)


@pytest.mark.django_db
def test_retire_now_drops_a_compromised_key_and_its_tokens_at_once(agent, commit):
    token = token_for(agent)
    compromised = kid_of(token)
    commit(keys.fencing_key_rotate, publish_delay_ms=0)
    commit(keys.fencing_key_retire, kid=compromised)
    assert verifies(token) is None  # retiring: still published
    commit(keys.fencing_key_retire, kid=compromised, immediately=True)
    assert verifies(token) == "unknown_key" and states()[compromised] == "retired"


# --- The command ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_lists_rotates_and_retires_and_audits_each_change(
    agent, capsys, db_clock, django_capture_on_commit_callbacks
):
    old = kid_of(token_for(agent))
    with django_capture_on_commit_callbacks(execute=True):
        call_command("fencing_keys", "rotate")
    rotated = capsys.readouterr().out
    new = FencingKey.objects.exclude(kid=old).get().kid
    assert rotated.startswith(f"fencing key {new}: published now; signs from ")
    assert "(in 60 s)" in rotated and f"`fencing_keys retire {old}`" in rotated

    call_command("fencing_keys", "list")
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["kid", "state", "created", "activates", "retires"]
    assert [row.split()[:2] for row in rows] == [[new, "pending"], [old, "signing"]]
    assert rows[0].split()[4] == "-"

    with pytest.raises(CommandError, match=f"only key that can sign now.*once {new} activates"):
        call_command("fencing_keys", "retire", old)
    db_clock.advance(DELAY_MS)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("fencing_keys", "retire", old)
    retired = capsys.readouterr().out
    assert retired.startswith(f"fencing key {old}: retired; signs no more")
    assert "published until " in retired and "when every token it signed has expired" in retired
    call_command("fencing_keys", "list")
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[:2] for row in rows] == [[new, "signing"], [old, "retiring"]]
    until = FencingKey.objects.get(kid=old).publish_until_ms
    assert rows[1].split()[4] == datetime.fromtimestamp(until / 1000, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    with pytest.raises(CommandError, match="no fencing key 'nope'"):
        call_command("fencing_keys", "retire", "nope")

    entries = list(AuditEntry.objects.filter(object_type="fencing_key").order_by("seq"))
    assert [(e.action, e.object_id, e.actor_role) for e in entries] == [
        ("fencing_key.rotate", new, "admin"),
        ("fencing_key.retire", old, "admin"),
    ]
    assert all(e.actor_name.startswith("cli") for e in entries)
    assert entries[1].before == {"kid": old, "state": "published"}
    assert entries[1].after == {"kid": old, "state": "retiring", "publish_until_ms": until}


@pytest.mark.django_db
def test_reading_the_key_set_writes_no_audit_entry(api):
    assert jwks_kids(api)  # the first key is made on first use
    assert not AuditEntry.objects.exists()


# --- The migration that seals plaintext keys ----------------------------------------------

BEFORE = ("core", "0004_audit_keyed_chain_and_truncate_guard")
SEALING = ("core", "0005_fencing_keys_sealed_with_lifecycle")


@pytest.mark.django_db(transaction=True)
def test_the_data_migration_seals_existing_keys_and_empties_the_plaintext(settings):
    from importlib import import_module

    settings.LEASEBOARD_FENCING_KEK, settings.LEASEBOARD_FENCING_RETIRED_KEKS = KEK_A, ()
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    try:
        state = executor.loader.project_state(BEFORE)
        old_model = state.apps.get_model("core", "FencingKey")
        created = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        retired_at = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
        plaintext = {}
        for retired in (retired_at, None):
            private = fencing.generate_private_key()
            kid = fencing.key_id(fencing.public_key_raw(private))
            plaintext[kid] = private
            row = old_model.objects.create(
                kid=kid, private_key=private, public_key=fencing.public_key_raw(private)
            )
            old_model.objects.filter(id=row.id).update(created_at=created, retired_at=retired)
        retired_kid, active_kid = plaintext

        # The schema steps before the data step, then the data step itself, called directly.
        migration = executor.loader.get_migration(*SEALING)
        step = next(
            i for i, op in enumerate(migration.operations) if isinstance(op, migrations.RunPython)
        )
        module = import_module(migration.__module__)
        with connection.schema_editor() as editor:
            for op in migration.operations[:step]:
                after = state.clone()
                op.state_forwards("core", after)
                op.database_forwards("core", editor, state, after)
                state = after
            module.seal_plaintext_keys(state.apps, editor)
        mid = state.apps.get_model("core", "FencingKey")
        ms = int(created.timestamp() * 1000)
        for key in mid.objects.all():
            assert bytes(key.private_key) == b""
            assert key.kek_id == fencing_kek_id(KEK_A)
            opened = FencingKeyring(KEK_A).open(
                key.private_key_sealed, kid=key.kid, kek_id=key.kek_id
            )
            assert opened == plaintext[key.kid]
            assert (key.created_at_ms, key.activate_at_ms) == (ms, ms)
        retired_row = mid.objects.get(kid=retired_kid)
        assert retired_row.retired_at_ms == retired_row.publish_until_ms == ms + 86_400_000
        assert mid.objects.get(kid=active_kid).retired_at_ms is None

        # The rest of the migration, then the service signs with the migrated key.
        with connection.schema_editor() as editor:
            for op in migration.operations[step + 1 :]:
                after = state.clone()
                op.state_forwards("core", after)
                op.database_forwards("core", editor, state, after)
                state = after
        executor.recorder.record_applied(*SEALING)
        assert private_keys_in_clear(raw_fencing_key_rows()) == []
        with connection.cursor() as cur:
            columns = [
                c.name
                for c in connection.introspection.get_table_description(cur, "core_fencingkey")
            ]
        assert "private_key" not in columns
        assert states() == {active_kid: "signing", retired_kid: "retired"}
        keys.fencing_keys_forget()
        now = db_now_ms()
        token = keys.fencing_token_issue(
            work_key="w", epoch=1, lease_id="l", holder="h", now_ms=now, expires_at_ms=now + 1000
        )
        assert kid_of(token) == active_kid and verifies(token) is None

        # And back: the old shape with the same plaintext (every key must still open).
        executor = MigrationExecutor(connection)
        executor.migrate([BEFORE])
        back = executor.loader.project_state(BEFORE).apps.get_model("core", "FencingKey")
        assert {k.kid: bytes(k.private_key) for k in back.objects.all()} == plaintext
        assert back.objects.get(kid=retired_kid).retired_at == retired_at
    finally:
        executor = MigrationExecutor(connection)
        if SEALING not in executor.loader.applied_migrations:
            executor.migrate(executor.loader.graph.leaf_nodes())
        keys.fencing_keys_forget()


def test_the_migration_seals_plaintext_keys_in_the_embedded_sqlite_file(tmp_path):
    data = tmp_path / "data"
    assert manage(data, "migrate", "core", BEFORE[1], "-v", "0").returncode == 0
    private = fencing.generate_private_key()
    public = fencing.public_key_raw(private)
    db = sqlite3.connect(sqlite_path(data))
    with db:
        db.execute(
            "INSERT INTO core_fencingkey (kid, private_key, public_key, created_at) "
            "VALUES (?, ?, ?, '2026-11-01 12:00:00')",
            (fencing.key_id(public), private, public),
        )
    db.close()
    assert manage(data, "migrate", "-v", "0").returncode == 0
    rows = sqlite_rows(data, "SELECT * FROM core_fencingkey")
    assert len(rows) == 1 and private_keys_in_clear(rows) == []
    listed = manage(data, "fencing_keys", "list")
    assert listed.stdout.splitlines()[1].split()[:4] == [
        fencing.key_id(public),
        "signing",
        "2026-11-01T12:00:00Z",
        "2026-11-01T12:00:00Z",
    ]
