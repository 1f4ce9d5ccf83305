"""The settings package (leaseboard/settings/), one module per subject behind the one name
DJANGO_SETTINGS_MODULE=leaseboard.settings: every module is read, each setting is defined
in one module only and is the value Django reads, and the values derived from others come
out as they did when the settings were one file (checked in a fresh process, as
manage.py, gunicorn and the worker load them)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

import leaseboard.settings as package
from leaseboard.settings import (
    base,
    database,
    domain,
    keys,
    observability,
    security,
    worker,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "leaseboard" / "settings"
SUBJECTS = (base, database, domain, keys, observability, security, worker)


def _assigned(module: object) -> set[str]:
    """The upper-case names a module assigns itself (not those it imports)."""
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    names: set[str] = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and leaf.id.isupper():
                    names.add(leaf.id)
    return names


def test_the_package_reads_every_module_in_it() -> None:
    imported = {
        node.module
        for node in ast.parse((PACKAGE / "__init__.py").read_text()).body
        if isinstance(node, ast.ImportFrom) and [a.name for a in node.names] == ["*"]
    }
    on_disk = {f"leaseboard.settings.{p.stem}" for p in PACKAGE.glob("*.py")} - {
        "leaseboard.settings.__init__"
    }
    assert imported == on_disk == {m.__name__ for m in SUBJECTS}


def test_each_setting_is_defined_in_one_module_and_is_what_django_reads() -> None:
    owner: dict[str, str] = {}
    for module in SUBJECTS:
        for name in _assigned(module):
            assert name not in owner, f"{name}: in {owner.get(name)} and {module.__name__}"
            owner[name] = module.__name__
            assert getattr(package, name) is getattr(module, name)
            assert hasattr(settings, name), name  # (the test runner replaces a few values)
    # The subjects the split named, each with a setting it owns.
    assert owner["DATABASES"] == "leaseboard.settings.database"
    assert owner["CELERY_BROKER_URL"] == "leaseboard.settings.worker"
    assert owner["AXES_FAILURE_LIMIT"] == "leaseboard.settings.security"
    assert owner["LEASE_DEFAULTS"] == "leaseboard.settings.domain"
    assert owner["LOGGING"] == "leaseboard.settings.observability"
    assert owner["LEASEBOARD_AUDIT_KEY"] == "leaseboard.settings.keys"
    assert owner["INSTALLED_APPS"] == "leaseboard.settings.base"


def test_the_repository_root_is_where_the_templates_and_manage_py_are() -> None:
    assert base.BASE_DIR == ROOT and (ROOT / "manage.py").exists()
    assert base.TEMPLATES[0]["DIRS"] == [ROOT / "templates"]
    assert base.STATICFILES_DIRS == [ROOT / "static"]


def test_the_identity_providers_origin_is_what_csp_lets_forms_reach() -> None:
    assert security.sso_origins("") == []
    assert security.sso_origins("https://idp.example/realms/x") == ["https://idp.example"]


def _loaded(tmp_path: Path, **env: str) -> dict[str, object]:
    """Some settings as a fresh process loads them from this environment alone."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEASEBOARD_", "DATABASE", "REDIS_URL", "CELERY_", "PYTEST"))
    }
    clean.update(
        DJANGO_SETTINGS_MODULE="leaseboard.settings",
        LEASEBOARD_DATA_DIR=str(tmp_path),
        LEASEBOARD_TESTING="1",
        **env,
    )
    script = (
        "import json; from django.conf import settings as s; print(json.dumps({"
        "'db': s.DATABASES['default']['ENGINE'], 'replica': 'replica' in s.DATABASES,"
        "'options': s.DATABASES['default'].get('OPTIONS', {}).get('options', ''),"
        "'broker': s.CELERY_BROKER_URL, 'transport': sorted(s.CELERY_BROKER_TRANSPORT_OPTIONS),"
        "'beat': sorted(s.CELERY_BEAT_SCHEDULE), 'stale': s.LEASEBOARD_SWEEPS_STALE_AFTER_S,"
        "'outage': s.LEASEBOARD_OUTAGE_MIN_MS, 'renew_after': s.LEASE_DEFAULTS.renew_after_ms,"
        "'form_action': (s.CONTENT_SECURITY_POLICY or {}).get('DIRECTIVES', {}).get('form-action'),"
        "'backends': s.AUTHENTICATION_BACKENDS[-1].rsplit('.', 1)[-1],"
        "'generated': s.KEYS_MAY_BE_GENERATED, 'access': s.LOGGING['handlers']['access']['class'],"
        "}, default=str))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_embedded_default_needs_no_configuration(tmp_path: Path) -> None:
    got = _loaded(tmp_path)
    assert got["db"] == "django.db.backends.sqlite3" and not got["replica"]
    assert got["broker"] == "filesystem://" and "data_folder_in" in got["transport"]
    assert (tmp_path / "broker" / "queue").is_dir()
    assert got["beat"] == ["audit-checkpoint", "lease-event-retention", "lease-sweep"]
    assert got["stale"] == 10.0 and got["outage"] == 3000  # from the 1 s sweep interval
    assert got["renew_after"] == 5000  # a third of the 15 s ttl
    assert got["form_action"] == ["'self'"] and got["backends"] == "LocalPasswordBackend"
    assert got["generated"] is True and got["access"] == "logging.StreamHandler"


def test_postgresql_redis_and_single_sign_on_switch_on_from_the_environment(
    tmp_path: Path,
) -> None:
    # deliberate: one environment variable a line (data, alike in shape only).
    got = _loaded(
        tmp_path,
        DATABASE_URL="postgres://lb@127.0.0.1/lb",
        DATABASE_REPLICA_URL="postgres://lb@127.0.0.2/lb",
        REDIS_URL="redis://127.0.0.1:6379/9",
        LEASEBOARD_SWEEP_INTERVAL_S="2",
        LEASEBOARD_AUDIT_CHECKPOINT_INTERVAL_S="0",
        LEASEBOARD_OIDC_ISSUER="https://idp.example/realms/x",
        LEASEBOARD_OIDC_CLIENT_ID="leaseboard",
        LEASEBOARD_OIDC_CLIENT_SECRET="s" * 20,
        LEASEBOARD_ACCESS_LOG=str(tmp_path / "access.log"),
    )
    assert got["db"] == "django.db.backends.postgresql" and got["replica"]
    # Under the tests the audit table's TRUNCATE guard lets Django's flush through.
    assert "leaseboard.audit_truncate=allow" in str(got["options"])
    assert got["broker"] == "redis://127.0.0.1:6379/9"
    assert "visibility_timeout" in got["transport"]
    assert got["beat"] == ["lease-event-retention", "lease-sweep"]
    assert got["stale"] == 20.0 and got["outage"] == 6000
    assert got["form_action"] == ["'self'", "https://idp.example"]
    assert got["backends"] == "LeaseboardOIDCBackend"
    assert got["access"] == "logging.FileHandler"
