"""Settings parse the environment strictly and fail fast, naming the variable."""

from __future__ import annotations

import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import database_from_url, env_int
from tests.security.embedded import manage_check


@pytest.fixture
def shipped_bounds(monkeypatch):  # type: ignore[no-untyped-def]
    # tests/pg_env.py sets generous bounds for the suite; these tests read the shipped ones.
    for name in ("STATEMENT", "LOCK"):
        monkeypatch.delenv(f"LEASEBOARD_DB_{name}_TIMEOUT_MS", raising=False)
    monkeypatch.delenv("LEASEBOARD_DB_CONNECT_TIMEOUT_S", raising=False)


BOUNDS = "-c statement_timeout=1500 -c lock_timeout=1000"  # the hot paths' (docs/design.md §14)


def test_a_postgres_url_becomes_typed_database_settings(shipped_bounds):
    db = database_from_url(
        "postgres://lb:s%40cret@db.internal:6432/leases?sslmode=require"
        "&server_side_binding=true&prepare_threshold=3"
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "leases",
        "lb",
        "s@cret",
        "db.internal",
        "6432",
    )
    assert db["OPTIONS"] == {
        "sslmode": "require",
        "server_side_binding": True,
        "prepare_threshold": 3,
        # An OLTP statement never wins back a JIT compile; every statement and lock wait
        # has the hot paths' bound, and connecting has one too.
        "options": f"-c jit=off {BOUNDS}",
        "connect_timeout": 2,
    }
    # By default the hot paths' statements are prepared after 5 runs; `none` turns it off.
    assert database_from_url("postgres://h/db")["OPTIONS"]["prepare_threshold"] == 5
    off = database_from_url("postgres://h/db?prepare_threshold=none")["OPTIONS"]
    assert off["prepare_threshold"] is None


def test_a_postgres_url_may_keep_jit_or_add_its_own_options(shipped_bounds):
    on = database_from_url("postgres://h/db?options=-c%20jit%3Don")["OPTIONS"]
    assert on["options"] == f"-c jit=on {BOUNDS}"
    extra = database_from_url("postgres://h/db?options=-c%20work_mem%3D64MB")["OPTIONS"]
    assert extra["options"] == f"-c jit=off -c work_mem=64MB {BOUNDS}"


def test_a_sqlite_url_runs_in_wal_with_immediate_transactions(tmp_path):
    db = database_from_url(f"sqlite:///{tmp_path}/x.sqlite3")
    assert db["NAME"] == f"{tmp_path}/x.sqlite3"
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]


def test_an_unknown_scheme_is_refused_by_name():
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url("mysql://x/y")


def test_a_bad_integer_names_the_variable(monkeypatch):
    monkeypatch.setenv("LEASE_TTL_MS", "soon")
    with pytest.raises(ImproperlyConfigured, match="LEASE_TTL_MS"):
        env_int("LEASE_TTL_MS", 15_000)


def start_up(tmp_path, **env: str):  # type: ignore[no-untyped-def]
    """`manage.py check` in a fresh process: this environment with `env` added."""
    return manage_check({**os.environ, **env, "LEASEBOARD_DATA_DIR": str(tmp_path)})


def test_unsafe_lease_timing_stops_start_up_naming_the_parameter(tmp_path):
    result = start_up(tmp_path, LEASE_TTL_MS="9000", LEASE_RENEW_AFTER_MS="4000")
    assert result.returncode != 0
    assert "lease timing: ttl_ms: must be at least 3 x renew_after_ms" in result.stderr


def test_an_unsafe_skew_allowance_stops_start_up_naming_the_setting(tmp_path):
    result = start_up(tmp_path, LEASE_TTL_MS="9000", LEASEBOARD_FENCING_SKEW_MS="9000")
    assert result.returncode != 0
    assert "LEASEBOARD_FENCING_SKEW_MS: must be below the default ttl_ms (9000)" in result.stderr
