"""The shared web layer: redirects to a browser-supplied `next` stay on this site, and the
apps' web code depends on `leaseboard.web`, never on each other."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from django.test import RequestFactory

from leaseboard.core.models import Alert
from leaseboard.web.redirects import is_local_path

PACKAGE = Path(__file__).resolve().parents[2] / "leaseboard"


def _alert(n: int) -> Alert:
    return Alert.objects.create(kind="jeopardy", dedupe_key=f"web:{n}", message="m", opened_at_ms=n)


@pytest.mark.django_db
def test_acknowledge_sends_a_foreign_next_to_the_alerts_page_and_honours_a_local_one(
    operator_client,
):
    evil = operator_client.post(
        f"/alerts/{_alert(1).id}/acknowledge",
        {"note": "on it", "next": "https://evil.example/"},
    )
    assert evil.status_code == 302
    assert evil["Location"] == "/alerts/"

    local = operator_client.post(
        f"/alerts/{_alert(2).id}/acknowledge",
        {"note": "on it", "next": "/work/k-1?lease=abc"},
    )
    assert local.status_code == 302
    assert local["Location"] == "/work/k-1?lease=abc"
    assert Alert.objects.filter(acknowledged_at_ms__isnull=False).count() == 2


@pytest.mark.django_db
def test_a_standing_action_never_redirects_off_site(operator_client):
    # "/\\host" passed the old startswith("/") check; browsers read it as "//host".
    url = f"/takeovers/effects/{uuid.uuid4()}/reconcile"
    for target in ("/\\evil.example/", "//evil.example/", "https://evil.example/"):
        response = operator_client.post(url, {"resolution": "confirmed", "next": target})
        assert response.status_code == 302
        assert response["Location"] == "/takeovers/standing/", target
    response = operator_client.post(url, {"resolution": "confirmed", "next": "/work/k-2"})
    assert response["Location"] == "/work/k-2"


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("/alerts/", True),
        ("/work/a%2Fb?lease=1#top", True),
        ("", False),
        ("alerts/", False),  # relative to the current path: not a path we name
        ("https://evil.example/", False),
        ("http://testserver/alerts/", False),  # same host, but absolute
        ("//evil.example/", False),
        ("/\\evil.example/", False),
        ("\\\\evil.example/", False),
        ("///evil.example/", False),
        ("javascript:alert(1)", False),
        ("/\t/evil.example/", False),  # a browser drops the tab: "//evil.example/"
        ("/\x00/evil.example", False),
        (" /alerts/", False),
    ],
)
def test_only_a_path_on_this_site_counts_as_local(target, local):
    request = RequestFactory().post("/x", {"next": target})
    assert is_local_path(request, target) is local


def _imports(package: str) -> list[tuple[str, str]]:
    found = []
    for path in (PACKAGE / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(str(path), a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.append((str(path), node.module))
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("dashboard", ("leaseboard.takeovers",)),
        ("takeovers", ("leaseboard.dashboard",)),
        (
            "web",
            ("leaseboard.dashboard", "leaseboard.takeovers", "leaseboard.sandbox"),
        ),
    ],
)
def test_web_code_depends_on_the_web_layer_not_on_another_app(package, forbidden):
    offenders = [
        (path, name)
        for path, name in _imports(package)
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]
    assert offenders == []
    assert not (PACKAGE / "dashboard" / "roles.py").exists()
