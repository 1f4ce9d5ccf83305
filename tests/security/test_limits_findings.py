"""The security review's findings on limits and production settings, replayed as tests.

Each test is one finding as it was reported; on the code before the fix every one of them
failed (unthrottled guessing and floods, `check --deploy` warnings, a mounted sandbox, a
CDN-loaded docs page, webhooks signed with SECRET_KEY).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.builders import PASSWORD, make_user
from tests.security.webhook_sink import alert_webhook_delivered

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = ROOT / "docs" / "production.env"


def env_file(path: Path) -> dict[str, str]:
    """KEY=value lines; blank lines and # comments skipped; no shell expansion."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def production_env(tmp_path: Path) -> dict[str, str]:
    """docs/production.env as a process environment. Only the data directory moves (to a
    temporary one), so the test writes nothing under /var/lib."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    env.update(env_file(PRODUCTION_ENV))
    env["LEASEBOARD_DATA_DIR"] = str(tmp_path / "data")
    return env


# -- sign-in: 100 wrong passwords for one account ------------------------------------------


@pytest.mark.django_db
def test_100_wrong_passwords_for_one_account_lock_it_out(client, fast_passwords):
    make_user("victim", "operator")
    statuses = [
        client.post("/login/", {"username": "victim", "password": f"guess-{i}"}).status_code
        for i in range(100)
    ]
    limit = getattr(settings, "AXES_FAILURE_LIMIT", 5)
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert set(statuses[limit - 1 :]) == {429}  # then the lock-out page, every time
    # Locked out means locked out: the right password does not sign in either.
    r = client.post("/login/", {"username": "victim", "password": PASSWORD})
    assert r.status_code == 429 and "_auth_user_id" not in client.session
    assert b"Too many failed sign-ins" in r.content
    # The failures are on record (the lock-out's own store).
    from axes.models import AccessAttempt

    assert AccessAttempt.objects.filter(username="victim").exists()


# -- API: 500 bad-token calls ---------------------------------------------------------------


@pytest.mark.django_db
def test_500_bad_token_calls_meet_429_rate_limited_with_retry_after(api):
    answers = [
        api.post(
            "/api/v1/leases/renew",
            {"leases": []},
            token=f"lb_forged-{i}",
        )
        for i in range(500)
    ]
    statuses = [r.status_code for r in answers]
    assert 429 in statuses, "500 forged tokens and never a 429"
    first = statuses.index(429)
    assert set(statuses[:first]) == {401} and set(statuses[first:]) == {429}
    limited = answers[first]
    assert limited["Content-Type"].startswith("application/problem+json")
    assert limited.json_body["code"] == "rate_limited"
    assert int(limited["Retry-After"]) >= 1


# -- production settings: check --deploy -------------------------------------------------------


@pytest.mark.slow
def test_check_deploy_passes_at_warning_level_with_the_production_example(tmp_path):
    assert PRODUCTION_ENV.exists(), "docs/production.env is missing"
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    for warning in ("W004", "W008", "W012", "W016"):
        assert warning not in output
    assert result.returncode == 0, output


@pytest.mark.slow
def test_the_production_example_sets_the_proxy_header_and_a_csp(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "diffsettings"],
        cwd=ROOT,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "SECURE_PROXY_SSL_HEADER = ('HTTP_X_FORWARDED_PROTO', 'https')" in result.stdout
    assert "CONTENT_SECURITY_POLICY = " in result.stdout


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy(client):
    policy = client.get("/login/")["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


# -- the demo payments sandbox -----------------------------------------------------------------


@pytest.mark.django_db
def test_the_payments_sandbox_is_not_mounted_outside_the_demo(client):
    from leaseboard.sandbox.models import Payment

    assert client.get("/sandbox/payments").status_code == 404
    body = json.dumps({"amount_cents": 100, "currency": "EUR", "payee": "mallory"})
    r = client.post("/sandbox/payments", data=body, content_type="application/json")
    assert r.status_code == 404
    assert not Payment.objects.exists()


# -- API docs ------------------------------------------------------------------------------------


def test_the_api_docs_load_no_third_party_script(client):
    r = client.get("/api/v1/docs")
    assert r.status_code == 200
    page = r.content.decode()
    assert "cdn" not in page.lower() and "https://" not in page and "http://" not in page
    assert "/static/ninja/swagger-ui-bundle.js" in page


# -- webhook secret ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_webhook_is_never_signed_with_secret_key(agent, settings):
    from leaseboard.sweeps import notifications

    received, _ = alert_webhook_delivered(agent)
    signed_with_secret_key = [
        body
        for headers, body in received
        if notifications.verify(body, headers["X-Leaseboard-Signature"], settings.SECRET_KEY)
    ]
    assert signed_with_secret_key == []
    assert settings.LEASEBOARD_WEBHOOK_SECRET != settings.SECRET_KEY
