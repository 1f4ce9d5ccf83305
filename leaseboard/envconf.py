"""Reading the environment for settings: typed values that fail fast naming the variable,
secret keys kept outside the database, and DATABASE_URL into Django's DATABASES entry.
leaseboard.settings reads every variable through these; nothing here reads Django's
settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


RATE_PERIODS_S = {"s": 1, "m": 60, "h": 3600}


def env_rate(name: str, default: str) -> tuple[int, int] | None:
    """`N/s`, `N/m` or `N/h` as (requests, window seconds); `off` (or `0`) as None."""
    raw = (os.environ.get(name) or default).strip().lower()
    if raw in {"off", "0", "none"}:
        return None
    count, _, unit = raw.partition("/")
    if not count.isdigit() or int(count) < 1 or unit not in RATE_PERIODS_S:
        raise ImproperlyConfigured(
            f"{name} must look like 600/m (per s, m or h) or be off, got {raw!r}"
        )
    return int(count), RATE_PERIODS_S[unit]


def env_proxy_header(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto: https` as Django's ("HTTP_X_FORWARDED_PROTO", "https")."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = raw.partition(":")
    header, value = header.strip(), value.strip()
    if not sep or not header or not value or not header.replace("-", "").isalnum():
        raise ImproperlyConfigured(f"{name} must look like 'X-Forwarded-Proto: https', got {raw!r}")
    return "HTTP_" + header.upper().replace("-", "_"), value


def db_timeouts() -> tuple[int, int, int]:
    """(connect timeout s, statement timeout ms, lock timeout ms) of a web connection:
    LEASEBOARD_DB_CONNECT_TIMEOUT_S (2), LEASEBOARD_DB_STATEMENT_TIMEOUT_MS (1500) and
    LEASEBOARD_DB_LOCK_TIMEOUT_MS (1000); 0 turns a server-side bound off."""
    return (
        env_int("LEASEBOARD_DB_CONNECT_TIMEOUT_S", 2, minimum=2),
        env_int("LEASEBOARD_DB_STATEMENT_TIMEOUT_MS", 1500),
        env_int("LEASEBOARD_DB_LOCK_TIMEOUT_MS", 1000),
    )


def database_from_url(url: str, data_dir: Path | None = None) -> dict:
    """Parse `postgres://user:pass@host:port/name?opt=v` or `sqlite:///path` into DATABASES
    (`sqlite:///` alone: leaseboard.sqlite3 in `data_dir`)."""
    parsed = urlparse(url)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        options: dict[str, object] = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        # psycopg options Django reads as typed values, not strings.
        if "server_side_binding" in options:
            options["server_side_binding"] = str(options["server_side_binding"]).lower() in {
                "1",
                "true",
                "yes",
                "on",
            }
        # The hot paths' statements (acquire, renew, effect authorization) go through
        # core.sql.prepared_cursor: PostgreSQL prepares each after this many runs on a
        # connection and stops planning it per request (Django's own cursors bind on the
        # client and never prepare). `prepare_threshold=none` behind a transaction-pooling
        # PgBouncer older than 1.21, which cannot keep a prepared statement.
        raw = str(options.get("prepare_threshold", "5"))
        options["prepare_threshold"] = None if raw.lower() == "none" else int(raw)
        # PostgreSQL's JIT compiles any plan estimated above jit_above_cost: 100+ ms an
        # OLTP statement never wins back (a sweep batch of 200 leases: 151 ms with it, 37 ms
        # without; docs/benchmarks.md). Off unless the URL's `options` say otherwise.
        if "jit" not in str(options.get("options", "")):
            options["options"] = ("-c jit=off " + str(options.get("options", ""))).strip()
        # Fail fast (docs/design.md §14): connecting is bounded (psycopg's own default is
        # 130 s; 2 is libpq's minimum), and every statement and lock wait gets the hot
        # paths' bound as the connection's default, enforced by the server. Sweeps,
        # retention and config apply raise both for their own transactions
        # (leaseboard.core.dbfaults). The URL's own `connect_timeout` or
        # `-c statement_timeout=`/`-c lock_timeout=` win.
        connect_s, statement_ms, lock_ms = db_timeouts()
        options.setdefault("connect_timeout", connect_s)
        for name, value in (("statement_timeout", statement_ms), ("lock_timeout", lock_ms)):
            if value and name not in str(options["options"]):
                options["options"] = f"{options['options']} -c {name}={value}"
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "leaseboard",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": env_int("DB_CONN_MAX_AGE", 60),
            # Off by default: a health check is a `SELECT 1` round trip before the first query
            # of every request. Without it a connection PostgreSQL dropped (a restart, a
            # failover) fails the one request that finds it and is then closed and replaced.
            "CONN_HEALTH_CHECKS": env_bool("DB_CONN_HEALTH_CHECKS", False),
            "OPTIONS": options,
            "TEST": {"NAME": os.environ.get("TEST_DATABASE_NAME") or None},
        }
    if parsed.scheme == "sqlite":
        default = str((data_dir or Path("var")) / "leaseboard.sqlite3")
        path = unquote(parsed.path)
        if path.startswith("//"):
            path = path[1:]
        elif path.startswith("/") and not url.startswith("sqlite:////"):
            path = path[1:] or default
        return sqlite_database(path or default)
    raise ImproperlyConfigured(
        f"DATABASE_URL must start with postgres:// or sqlite:///, got scheme {parsed.scheme!r}"
    )


def sqlite_database(path: str) -> dict:
    # WAL + IMMEDIATE transactions: writers take the lock at BEGIN, so two grants cannot
    # both read "no live lease" and then both write.
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": path,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


def env_keys(
    name: str,
    *,
    retired_name: str,
    generated: Path | None,
    what: str,
    min_chars: int,
    missing: str,
) -> tuple[str, tuple[str, ...]]:
    """A secret key kept outside the database, and its retired predecessors: from `name`,
    or the first line of the file named by `name`_FILE (later lines: retired keys), plus
    `retired_name` (space- or comma-separated). Without either: a key generated once into
    the file `generated` where one may be (DEBUG, tests, embedded SQLite), else `missing`
    is the start-up error. Every key is `what`, at least `min_chars` long."""
    env_key = os.environ.get(name, "").strip()
    key_file = os.environ.get(f"{name}_FILE", "").strip()
    retired = env_str(retired_name, "").replace(",", " ").split()
    if env_key and key_file:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    if key_file:
        try:
            lines = Path(key_file).read_text().splitlines()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE={key_file!r} cannot be read: {exc.strerror}"
            ) from None
        keys = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        if not keys:
            raise ImproperlyConfigured(f"{name}_FILE={key_file!r} holds no key")
        current, retired = keys[0], keys[1:] + retired
        source = f"{name}_FILE"
    elif env_key:
        current, source = env_key, name
    elif generated is not None:
        if not generated.exists():
            generated.write_text(secrets.token_urlsafe(32) + "\n")
            generated.chmod(0o600)
        current, source = generated.read_text().split()[0], str(generated)
    else:
        raise ImproperlyConfigured(missing)
    for key in (current, *retired):
        if len(key) < min_chars:
            raise ImproperlyConfigured(f"{source}: {what} is at least {min_chars} characters")
    return current, tuple(retired)
