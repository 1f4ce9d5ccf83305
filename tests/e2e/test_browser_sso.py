"""Single sign-on against a real OpenID Provider: panva/oidc-provider (npm, OpenID
Certified; tests/e2e/oidc_provider, installed by `npm ci`) started on a loopback port with
one confidential client and accounts read from a file, driven through the whole browser
flow in Chromium: discovery, the authorization code flow with PKCE, state and nonce, the
provider's login and consent pages, the callback, the person created on first sign-in
with the roles their groups give (`[sso.groups]` applied by `config apply` on a database
with no people), the sign-in audited with the provider and the subject, a group change at
the provider changing the roles at the next sign-in, and sign-out at the provider.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from leaseboard.core.models import AuditEntry, RoleScope
from leaseboard.policy.models import SsoIdentity
from leaseboard.policy.services.common import cli_actor
from leaseboard.policy.services.config import config_apply_text
from tests.builders import PASSWORD, ensure_role_groups, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROVIDER_DIR = Path(__file__).parent / "oidc_provider"
CLIENT_ID, CLIENT_SECRET = "leaseboard", "test-client-secret-not-for-production"
MAPPINGS = """
[sso]
groups_claim = "groups"
local_passwords = %s

[sso.groups]
payments-oncall = ["operator:payments"]
sre = ["operator", "approver:deploys"]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Provider:
    def __init__(self, issuer: str, accounts: Path) -> None:
        self.issuer, self.accounts = issuer, accounts

    def set_account(self, sub: str, **claims: Any) -> None:
        data = json.loads(self.accounts.read_text()) if self.accounts.exists() else {}
        data[sub] = claims
        self.accounts.write_text(json.dumps(data))


@pytest.fixture
def provider(live_server, tmp_path, settings):  # type: ignore[no-untyped-def]
    node = shutil.which("node")
    if node is None or not (PROVIDER_DIR / "node_modules" / "oidc-provider").exists():
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("node or tests/e2e/oidc_provider/node_modules missing (npm ci)")
        pytest.skip("node or the oidc-provider package is missing (npm ci in oidc_provider)")
    port = _free_port()
    issuer = f"http://127.0.0.1:{port}"
    accounts = tmp_path / "accounts.json"
    p = Provider(issuer, accounts)
    p.set_account("pat-sub-1", email="pat@example.com", preferred_username="pat",
                  groups=["payments-oncall"])  # fmt: skip
    client = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [f"{live_server.url}/oidc/callback/"],
        "post_logout_redirect_uris": [f"{live_server.url}/login/"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
    }
    env = {**os.environ, "PORT": str(port), "ACCOUNTS_FILE": str(accounts)}
    env["CLIENT_JSON"] = json.dumps(client)
    proc = subprocess.Popen(
        [node, str(PROVIDER_DIR / "server.mjs")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the provider says "ready" once it listens
            if line.startswith("ready"):
                break
        else:
            pytest.fail("the OpenID provider did not start")
        from leaseboard.policy.views import sso

        sso.discovery.cache_clear()
        settings.LEASEBOARD_OIDC_ISSUER = issuer
        settings.LEASEBOARD_OIDC_CLIENT_ID = settings.OIDC_RP_CLIENT_ID = CLIENT_ID
        settings.LEASEBOARD_OIDC_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
        settings.LEASEBOARD_OIDC_PROVIDER_NAME = "Test IdP"
        settings.AUTHENTICATION_BACKENDS = [
            *settings.AUTHENTICATION_BACKENDS,
            "leaseboard.policy.views.sso.LeaseboardOIDCBackend",
        ]
        csp = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
        csp["DIRECTIVES"]["form-action"] = [*csp["DIRECTIVES"]["form-action"], issuer]
        settings.CONTENT_SECURITY_POLICY = csp
        yield p
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        from leaseboard.policy.views import sso

        sso.discovery.cache_clear()


def _apply_mappings(local_passwords: bool) -> None:
    ensure_role_groups()
    config_apply_text(MAPPINGS % ("true" if local_passwords else "false"), actor=cli_actor("test"))


def _sign_in_at_provider(browser, base: str, login: str):  # type: ignore[no-untyped-def]
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{base}/login/")
    page.click("#sso-sign-in")
    page.wait_for_selector('input[name="login"]')  # the provider's own login page
    page.fill('input[name="login"]', login)
    page.fill('input[name="password"]', "any")
    page.click('button[type="submit"]')
    _through_consent(page, base)
    return page


def _through_consent(page, base: str) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_load_state()
    if not page.url.startswith(base):
        page.click('button[type="submit"]')  # the provider's consent page: Continue
    page.wait_for_url(f"{base}/**")


def test_the_full_sign_in_flow_creates_the_person_and_follows_their_groups(
    live_server, browser, provider
):
    _apply_mappings(local_passwords=True)
    base = live_server.url
    page = _sign_in_at_provider(browser, base, "pat-sub-1")
    assert page.url.rstrip("/") == base, page.url
    assert "pat" in page.inner_text(".who") and "operator" in page.inner_text(".who")
    identity = SsoIdentity.objects.select_related("user").get(subject="pat-sub-1")
    assert identity.issuer == provider.issuer and identity.user.username == "pat"
    assert not identity.user.has_usable_password()
    scope = RoleScope.objects.get(user=identity.user)
    assert (scope.role, scope.queues) == ("operator", ["payments"])
    entry = AuditEntry.objects.filter(action="auth.sso_sign_in").latest("seq")
    assert entry.after["provider"] == provider.issuer
    assert entry.after["subject"] == "pat-sub-1" and entry.after["created"] is True
    assert entry.after["groups"] == ["payments-oncall"]

    # Sign out here and at the provider (RP-initiated logout), back on the sign-in page.
    page.click(".tools button[type=submit], header form button")
    page.wait_for_load_state()
    if not page.url.startswith(base):
        page.click('button[name="logout"], button[type="submit"]')
    page.wait_for_url(f"{base}/login/**")

    # The provider moves pat to another group: the next sign-in gives the new roles.
    provider.set_account("pat-sub-1", email="pat@example.com", preferred_username="pat",
                         groups=["sre"])  # fmt: skip
    page = _sign_in_at_provider(browser, base, "pat-sub-1")
    identity.user.refresh_from_db()
    roles = set(identity.user.groups.values_list("name", flat=True))
    assert roles == {"operator", "approver"}
    scopes = dict(RoleScope.objects.filter(user=identity.user).values_list("role", "queues"))
    assert scopes == {"approver": ["deploys"]}  # operator now for every queue
    assert SsoIdentity.objects.count() == 1  # the same person, found by (issuer, subject)
    last = AuditEntry.objects.filter(action="auth.sso_sign_in").latest("seq")
    assert last.after["created"] is False and last.before["scopes"] == {"operator": ["payments"]}


def test_a_provider_user_never_takes_over_a_local_account_of_the_same_name(
    live_server, browser, provider
):
    _apply_mappings(local_passwords=True)
    local = make_user("pat", "admin")
    _sign_in_at_provider(browser, live_server.url, "pat-sub-1")
    identity = SsoIdentity.objects.select_related("user").get(subject="pat-sub-1")
    assert identity.user.pk != local.pk and identity.user.username == "pat-pat-sub-1"
    assert local.groups.filter(name="admin").exists()
    assert not identity.user.groups.filter(name="admin").exists()


def test_with_local_passwords_off_a_password_signs_nobody_in(live_server, provider):
    _apply_mappings(local_passwords=False)
    make_user("olga", "operator")
    client = Client()
    page = client.get("/login/").content.decode()
    assert 'id="sso-sign-in"' in page and 'id="password-form"' not in page
    response = client.post("/login/", {"username": "olga", "password": PASSWORD})
    assert response.status_code == 200 and "_auth_user_id" not in client.session
