"""An admin manages a recipient's credential in real headless Chromium, on a phone-wide
screen (390 px): creates it and sees its token once, gives it an epoch-notice webhook (a
bad URL is said at the field first), rotates the token (the old one is refused from then
on), revokes it. The page never scrolls sideways. Screenshots go to
artifacts/screenshots/recipients-*.png."""

from __future__ import annotations

import pytest

from tests.e2e.pages import PHONE, shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sideways(page) -> int:  # type: ignore[no-untyped-def]
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_an_admin_creates_a_recipient_sees_its_token_once_rotates_and_revokes_it(
    live_server, browser, settings
):
    from leaseboard.core.models import AuditEntry, Recipient
    from leaseboard.core.services.recipients import recipient_for_token
    from tests.builders import make_user

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("ada", "admin")
    page = sign_in(browser, live_server.url, "ada", PHONE)
    page.click("header nav >> text=Settings")
    page.click(".settings-nav >> text=Credentials")
    assert page.locator("#recipients .empty").inner_text() == "No recipients."

    # Created: the token is shown once, on the answer to the POST.
    page.fill("#recipient-form input[name='recipient-name']", "ledger")
    page.click("#recipient-form button[type=submit]")
    token = page.locator("#secret-once").inner_text().strip()
    assert token.startswith("lbr_")
    assert recipient_for_token(token) == Recipient.objects.get(name="ledger")
    assert _sideways(page) <= 0
    shot(page, "recipients-1-token-once")
    page.goto(page.url.split("/settings/")[0] + "/settings/credentials/")
    assert page.locator("#secret-once").count() == 0 and token not in page.content()
    row = page.locator("tr[data-name='ledger']")
    assert row.locator(".recipient-token").inner_text() == "active"

    # The webhook: a bad URL is said at the field and saves nothing; a good one saves.
    row.locator("input[name='url']").fill("ledger.example.com/epochs")
    row.locator(".webhook-form button[type=submit]").click()
    row = page.locator("tr[data-name='ledger']")
    error = row.locator(".field-error[data-field='url']")
    assert "webhook URL is http:// or https://" in error.inner_text()
    assert row.locator("input[name='url']").get_attribute("aria-invalid") == "true"
    assert Recipient.objects.get(name="ledger").webhook_url == ""
    shot(page, "recipients-2-webhook-error")
    long_url = "https://ledger.internal.example.com/hooks/leaseboard/epochs?tenant=acme-eu-west-1"
    row.locator("input[name='url']").fill(long_url)
    row.locator(".webhook-form button[type=submit]").click()
    assert page.locator("#secret-once").inner_text().startswith("whsec_")
    assert Recipient.objects.get(name="ledger").webhook_url == long_url
    assert _sideways(page) <= 0

    # Rotated: a new token, shown once; the old one is refused from the commit on.
    page.locator("tr[data-name='ledger'] button:text-is('Rotate')").click()
    rotated = page.locator("#secret-once").inner_text().strip()
    assert rotated.startswith("lbr_") and rotated != token
    assert recipient_for_token(token) is None and recipient_for_token(rotated) is not None
    shot(page, "recipients-3-rotated")

    # Revoked: no token works; the row says so and offers no second revoke.
    page.locator("tr[data-name='ledger'] button:text-is('Revoke')").click()
    assert "ledger: token revoked." in page.locator(".messages").inner_text()
    row = page.locator("tr[data-name='ledger']")
    assert row.locator(".recipient-token").inner_text() == "revoked"
    assert row.locator("button:text-is('Revoke')").count() == 0
    assert recipient_for_token(rotated) is None
    assert _sideways(page) <= 0
    shot(page, "recipients-4-revoked")

    actions = list(
        AuditEntry.objects.filter(object_type="recipient")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == [
        "recipient.create",
        "recipient.webhook_set",
        "recipient.token_rotate",
        "recipient.token_revoke",
    ]


def test_settings_answers_at_390_px_fit_and_pass_axe(live_server, browser, settings, agent):
    """What only a POST shows — an explanation's steps, field errors on the queue, rule
    and credential forms, a webhook secret shown once — fits a phone and passes axe."""
    from leaseboard.core.models import Queue
    from leaseboard.core.services.recipients import recipient_create
    from tests.builders import effect_rules, make_user
    from tests.e2e.a11y import axe_violations, describe

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("ada", "admin")
    queue = Queue.objects.create(name="payments")
    effect_rules(queue, ("payment.send", "require_approval"))
    recipient_create(name="ledger")
    base = live_server.url
    page = sign_in(browser, base, "ada", PHONE)
    problems: list[str] = []

    def check(name: str) -> None:
        shot(page, f"recipients-390-{name}")
        found = axe_violations(page)
        if found:
            problems.append(f"{name}:\n{describe(found)}")
        if _sideways(page) > 0:
            problems.append(f"{name} scrolls sideways by {_sideways(page)} px")

    page.goto(f"{base}/settings/explain")
    page.select_option("select[name='queue']", "payments")
    page.fill("input[name='kind']", "payment.send")
    page.fill("input[name='target']", "invoice-" + "9" * 60)
    page.fill("textarea[name='payload']", '{"amount_cents": 60000, "memo": "' + "x" * 120 + '"}')
    page.click("#explain-form button[type=submit]")
    assert page.locator("#steps tbody tr").count() == 1
    page.click("#explanation details summary")  # the facts, with the long target in them
    check("explain-result")

    page.goto(f"{base}/settings/queues/payments/")
    page.fill("input[name='capacity']", "-3")
    page.fill("textarea[name='windows']", "someday 25:00-26:00")
    page.click("#queue-form button[type=submit]")
    assert page.locator("#queue-form .field-error").count() >= 1
    check("queue-errors")

    page.goto(f"{base}/settings/queues/payments/rules/new")
    page.fill("input[name='name']", "r" * 80)
    page.fill("textarea[name='when']", "payload.amount_cents >")
    page.click("#rule-form button[type=submit]")
    assert page.locator("#rule-form .field-error").count() >= 1
    check("rule-errors")

    page.goto(f"{base}/settings/credentials/")
    page.fill("#recipient-form input[name='recipient-name']", "ledger")
    page.click("#recipient-form button[type=submit]")
    assert "already exists" in page.locator("#recipient-form .field-error").inner_text()
    page.locator("tr[data-name='ledger'] input[name='url']").fill(
        "https://ledger.example.com/" + "very-long-path-segment" * 8
    )
    page.locator("tr[data-name='ledger'] .webhook-form button[type=submit]").click()
    assert page.locator("#secret-once").inner_text().startswith("whsec_")
    check("webhook-secret")
    assert not problems, "\n\n".join(problems)
