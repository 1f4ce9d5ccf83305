"""Production settings from the environment (HTTPS, proxy header, CSP), the demo-only
sandbox, API docs served from this origin, and a webhook secret of its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from leaseboard.envconf import env_proxy_header
from tests.security.webhook_sink import alert_webhook_delivered

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEASEBOARD_", "PYTEST", "DJANGO_")) and k != "REDIS_URL"
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={
            **base,
            "LEASEBOARD_DATA_DIR": str(tmp_path),
            # DEBUG off on PostgreSQL needs the audit key from outside the database.
            "LEASEBOARD_AUDIT_KEY": "tests-only-audit-key-0123456789abcdef",
            # ... and the key that seals the fencing keys in it.
            "LEASEBOARD_FENCING_KEK": "tests-only-fencing-kek-0123456789abcdef",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- HTTPS and the proxy header --------------------------------------------------------------


@pytest.mark.slow
def test_https_mode_turns_on_redirect_hsts_and_secure_cookies(tmp_path):
    result = manage(
        "diffsettings",
        tmp_path=tmp_path,
        LEASEBOARD_HTTPS="true",
        LEASEBOARD_PROXY_SSL_HEADER="X-Forwarded-Proto: https",
    )
    assert result.returncode == 0, result.stderr
    for line in (
        "SECURE_SSL_REDIRECT = True",
        "SECURE_HSTS_SECONDS = 31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS = True",
        "SESSION_COOKIE_SECURE = True",
        "CSRF_COOKIE_SECURE = True",
        "SECURE_PROXY_SSL_HEADER = ('HTTP_X_FORWARDED_PROTO', 'https')",
    ):
        assert line in result.stdout


@pytest.mark.slow
def test_a_malformed_proxy_header_stops_start_up_naming_the_variable(tmp_path):
    result = manage("check", tmp_path=tmp_path, LEASEBOARD_PROXY_SSL_HEADER="https")
    assert result.returncode != 0
    assert "LEASEBOARD_PROXY_SSL_HEADER" in result.stderr


def test_the_proxy_header_setting_parses(monkeypatch):
    monkeypatch.setenv("LEASEBOARD_PROXY_SSL_HEADER", "X-Forwarded-Proto: https")
    assert env_proxy_header("LEASEBOARD_PROXY_SSL_HEADER") == ("HTTP_X_FORWARDED_PROTO", "https")
    monkeypatch.setenv("LEASEBOARD_PROXY_SSL_HEADER", "X Forwarded: https")
    with pytest.raises(ImproperlyConfigured, match="LEASEBOARD_PROXY_SSL_HEADER"):
        env_proxy_header("LEASEBOARD_PROXY_SSL_HEADER")


@pytest.mark.django_db
def test_behind_the_proxy_https_requests_pass_and_plain_http_is_redirected(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    plain = client.get("/login/")
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/login/"
    assert client.get("/login/", HTTP_X_FORWARDED_PROTO="https").status_code == 200
    # The load balancer's health probe comes over plain HTTP and must not be redirected.
    assert client.get("/healthz").status_code in (200, 503)


# -- CSP: the pages need no inline script, no eval, no inline style ----------------------------

TEMPLATES = ROOT / "templates"
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>")
HANDLER_ATTR = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
EVAL_HTMX = re.compile(r"hx-trigger=\"[^\"]*\[|hx-on|hx-vals=['\"]js:|hx-vars")


@pytest.mark.parametrize(
    "template", sorted(str(p.relative_to(TEMPLATES)) for p in TEMPLATES.rglob("*.html"))
)
def test_no_template_needs_unsafe_inline_or_eval(template):
    text = (TEMPLATES / template).read_text()
    assert not INLINE_SCRIPT.search(text), "inline <script>"
    assert not HANDLER_ATTR.search(text), "inline event handler"
    assert not EVAL_HTMX.search(text), "htmx expression that needs eval"
    assert " style=" not in text, "inline style"


def test_htmx_runs_without_eval_or_injected_styles():
    base = (TEMPLATES / "base.html").read_text()
    assert '"allowEval":false' in base and '"includeIndicatorStyles":false' in base


# -- API docs from this origin -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_docs_assets_are_served_from_this_origin(client):
    page = client.get("/api/v1/docs").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
    for asset in assets:
        assert asset.startswith("/static/"), asset
        r = client.get(asset)
        assert r.status_code == 200, asset
        r.close()


# -- the sandbox in the demo ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_demo_mounts_the_payments_sandbox(client, demo_mounted):
    assert client.get("/sandbox/payments").status_code == 200
    r = client.post("/sandbox/payments", data="{}", content_type="application/json")
    assert r.status_code == 400 and json.loads(r.content)["code"] == "validation_error"


def test_dev_py_demo_switches_the_demo_on():
    assert 'env["LEASEBOARD_DEMO"] = "true"' in (ROOT / "dev.py").read_text()


# -- webhook secret ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_secretless_webhook_is_signed_with_the_webhook_secret(agent, settings):
    from leaseboard.sweeps import notifications

    settings.LEASEBOARD_WEBHOOK_SECRET = "whsec-of-its-own-0123456789"
    received, delivery = alert_webhook_delivered(agent)
    assert delivery.status == "delivered"
    headers, body = received[0]
    assert notifications.verify(
        body, headers["X-Leaseboard-Signature"], "whsec-of-its-own-0123456789"
    )


@pytest.mark.django_db
def test_without_any_webhook_secret_nothing_is_sent_and_the_delivery_says_why(agent, settings):
    settings.LEASEBOARD_WEBHOOK_SECRET = ""
    received, delivery = alert_webhook_delivered(agent)
    assert received == []
    assert delivery.status == "dead" and "LEASEBOARD_WEBHOOK_SECRET" in delivery.last_error


@pytest.mark.slow
def test_a_configured_webhook_without_a_secret_stops_start_up(tmp_path):
    hooks = json.dumps({"webhooks": [{"url": "https://hooks.example.com/lb"}]})
    result = manage("check", tmp_path=tmp_path, LEASEBOARD_NOTIFY_DEFAULT=hooks)
    assert result.returncode != 0 and "LEASEBOARD_WEBHOOK_SECRET" in result.stderr
    result = manage("check", tmp_path=tmp_path, LEASEBOARD_WEBHOOK_SECRET="short")
    assert result.returncode != 0 and "at least 16 characters" in result.stderr
    result = manage(
        "check",
        tmp_path=tmp_path,
        LEASEBOARD_NOTIFY_DEFAULT=hooks,
        LEASEBOARD_WEBHOOK_SECRET="whsec-of-its-own-0123456789",
    )
    assert result.returncode == 0, result.stderr
