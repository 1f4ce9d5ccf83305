"""The decision page an approver's notification links to: approvers only, exactly the
content to decide (full payload, digest), decided once with CSRF enforced, and then shown
as decided (who, how) with a second decision refused `already_decided`."""

from __future__ import annotations

import pytest
from django.test import Client

from leaseboard.core.models import Effect
from tests.builders import effect_rules, effect_under, make_user

pytestmark = pytest.mark.django_db


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/login/")
    return client


def test_the_decision_page_shows_the_content_and_decides_once(scene):
    effect_rules(scene.lease.work_item.queue, ("deploy.*", "require_approval"))
    payload = {"version": "2.4.1", "env": "prod", "notes": "<script>x</script>", "ü": "ß"}
    effect = effect_under(
        scene.lease,
        scene.agent,
        "d-1",
        kind="deploy.release",
        target="svc-payments",
        payload=payload,
    )
    url = f"/takeovers/effects/{effect.id}"
    assert _client(make_user("olga-dp", "operator")).get(url).status_code == 403

    abe = _client(make_user("abe-dp", "approver"))
    page = abe.get(url)
    html = page.content.decode()
    assert page.status_code == 200
    assert effect.content_digest in html and "svc-payments" in html and "2.4.1" in html
    assert "&lt;script&gt;" in html and "<script>x" not in html  # shown, never run
    assert '"ü": "ß"' in html.replace("&quot;", '"')

    def decide(client: Client, decision: str) -> str:
        form = {
            "digest": effect.content_digest,
            "back": "effect",
            "note": "ok",
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        }
        response = client.post(f"{url}/{decision}", form, follow=True)
        assert response.status_code == 200
        return response.content.decode()

    assert "Effect authorized." in decide(abe, "approve")
    assert Effect.objects.get(id=effect.id).decision == "authorized"
    after = abe.get(url).content.decode()
    assert 'id="decided"' in after and "abe-dp" in after and 'id="approve-effect"' not in after
    other = _client(make_user("ada-dp", "approver"))
    assert "already_decided" in decide(other, "reject")
    assert Effect.objects.get(id=effect.id).decision == "authorized"
