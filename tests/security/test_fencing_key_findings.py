"""Security review findings on the fencing-token signing keys, replayed as they were
reported. Each test failed on the code the review looked at: Ed25519 private keys in
plaintext in core_fencingkey.private_key, no command to rotate or retire a key, and a
setting (LEASEBOARD_FENCING_KEY_DIR) that looked like it kept keys elsewhere but was read
nowhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from leaseboard.domain import fencing
from tests.security.embedded import manage, outside_env, production_check, sqlite_rows


def private_keys_in_clear(rows: Iterable[Iterable[object]]) -> list[str]:
    """Every 32-byte run, in any column of any row, that is the Ed25519 private key of a
    public key stored in that table: what a reader of the raw table could sign with."""
    rows = [[bytes(v) if isinstance(v, memoryview) else v for v in row] for row in rows]
    public = {v for row in rows for v in row if isinstance(v, bytes) and len(v) == 32}
    found = []
    for row in rows:
        for value in row:
            if isinstance(value, str):
                candidates = [value.encode()]
                try:
                    candidates.append(bytes.fromhex(value))
                except ValueError:
                    pass
            elif isinstance(value, bytes):
                candidates = [value]
            else:
                continue
            for blob in candidates:
                for i in range(len(blob) - 31):
                    if fencing.public_key_raw(blob[i : i + 32]) in public:
                        found.append(fencing.key_id(fencing.public_key_raw(blob[i : i + 32])))
    return found


def raw_fencing_key_rows() -> list[tuple[object, ...]]:
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM core_fencingkey")
        return list(cur.fetchall())


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_private_keys_sit_in_plaintext_in_the_database(agent):
    from tests.builders import leased_item

    executor, _ = agent()
    leased_item(executor)  # signs a token, creating the first key
    rows = raw_fencing_key_rows()
    assert len(rows) == 1
    assert private_keys_in_clear(rows) == []


def test_finding_the_embedded_sqlite_file_holds_no_private_key_either(tmp_path):
    data = tmp_path / "data"
    assert manage(data, "migrate", "--noinput", "-v", "0").returncode == 0
    rotated = manage(data, "fencing_keys", "rotate")
    assert rotated.returncode == 0, rotated.stderr
    rows = sqlite_rows(data, "SELECT * FROM core_fencingkey")
    assert len(rows) == 1 and private_keys_in_clear(rows) == []
    # Zero configuration: the key-encryption key was generated beside the database, 0600.
    kek = data / "fencing-kek"
    assert len(kek.read_text().strip()) >= 32 and kek.stat().st_mode & 0o077 == 0


@pytest.mark.postgres
@pytest.mark.django_db
def test_finding_no_command_rotates_or_retires_a_signing_key(capsys):
    call_command("fencing_keys", "rotate", "--publish-delay-ms", "0")
    call_command("fencing_keys", "rotate", "--publish-delay-ms", "0")
    capsys.readouterr()
    call_command("fencing_keys", "list")
    listed = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[1] for line in listed] == ["signing", "published"]
    newest = listed[0].split()[0]
    call_command("fencing_keys", "retire", newest)
    capsys.readouterr()
    call_command("fencing_keys", "list")
    states = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]}
    assert states[newest] == "retiring" and sorted(states.values()) == ["retiring", "signing"]


def _settings_check(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return production_check(tmp_path, outside_env(), **extra)


def test_finding_the_key_dir_setting_is_read_nowhere(tmp_path):
    # It looked like private keys were kept outside the database; they were not. Setting it
    # now stops start-up and names the variable that does protect them.
    result = _settings_check(tmp_path, LEASEBOARD_FENCING_KEY_DIR=str(tmp_path / "keys"))
    assert result.returncode != 0
    assert "LEASEBOARD_FENCING_KEY_DIR is not used" in result.stderr
    assert "LEASEBOARD_FENCING_KEK" in result.stderr


def test_production_settings_refuse_to_start_without_a_key_encryption_key(tmp_path):
    production = {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x",
        "LEASEBOARD_AUDIT_KEY": "a" * 40,
    }
    result = _settings_check(tmp_path, **production)
    assert result.returncode != 0
    assert "LEASEBOARD_FENCING_KEK (or LEASEBOARD_FENCING_KEK_FILE) is required" in result.stderr
    assert not (tmp_path / "fencing-kek").exists()  # never generated in production
    short = _settings_check(tmp_path, LEASEBOARD_FENCING_KEK="short", **production)
    assert short.returncode != 0 and "LEASEBOARD_FENCING_KEK: a key-encryption key is at least" in (
        short.stderr
    )
    ok = _settings_check(tmp_path, LEASEBOARD_FENCING_KEK="k" * 40, **production)
    assert ok.returncode == 0, ok.stderr
