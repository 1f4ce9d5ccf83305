"""Issue 33's findings on notification targets and approver notices, replayed: a webhook
URL with CR LF was accepted and then crashed the notice task (51 times in 15 s, holding
up another target's notice), webhooks reached 127.0.0.1 services and told them apart, a
removed target kept receiving, an agent's target broke the approval e-mail (so nobody was
told and `approve` became the default) and broke out of the Slack message, and notices
were posted more than once. Real PostgreSQL, real local HTTP receivers."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from leaseboard.core.models import Alert, Effect, Queue
from leaseboard.core.services.alerts import alerts_open, lease_alert
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.queues import notify_checked
from leaseboard.sweeps import notifications
from leaseboard.sweeps.approver_notices import approval_message, approval_notices_deliver_due
from leaseboard.sweeps.models import ApprovalNotice
from leaseboard.sweeps.services import sweep_run
from tests.builders import age_approval, effect_rules, effect_under, leased_item, make_user
from tests.sweeps.test_approver_notices import Receiver

pytestmark = [pytest.mark.postgres]

SECRET = "whsec_hostile_targets"
CRLF_URL = "http://hooks.example.com/a\r\nX-Injected: 1"


@pytest.fixture
def receivers():  # type: ignore[no-untyped-def]
    made: list[Receiver] = []

    def make(*statuses: int) -> Receiver:
        r = Receiver(list(statuses))
        made.append(r)
        return r

    yield make
    for r in made:
        r.server.shutdown()


def approvals_to(queue: Queue, *urls: str, emails: list[str] | None = None) -> None:
    """Store targets as they are, past the save-time check: rows saved before it existed,
    or edited in the database, must be refused at send time too."""
    queue.notify = {
        "approvals": {
            "webhooks": [{"url": u, "secret": SECRET} for u in urls],
            "emails": emails or [],
        }
    }
    queue.save(update_fields=["notify"])


def waiting_effect(scene, key: str = "refund-1", target: str = "order-7", **rule: Any) -> Effect:  # type: ignore[no-untyped-def]
    effect_rules(
        scene.lease.work_item.queue,
        RuleSpec(name="refunds", kind="payment.*", decision="require_approval", **rule),
    )
    effect = effect_under(
        scene.lease,
        scene.agent,
        key,
        kind="payment.refund",
        target=target,
        payload={"amount": "100.00"},
    )
    assert effect.decision == "pending_approval"
    return effect


# -- saved: validated ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "says"),
    [
        (CRLF_URL, "control characters"),
        ("http://[::1", "not a URL"),
        ("http://user:pw@hooks.example.com/", "no user or password"),
        ("http://hooks.example.com:99999/", "not a URL"),
        ("gopher://hooks.example.com/", "http:// or https://"),
        ("http://169.254.169.254/latest/meta-data/", "not a public one"),
        ("http://10.0.0.8/hook", "not a public one"),
        ("http://[::ffff:127.0.0.1]/hook", "not a public one"),
        ("http://localhost:6379/", "not a public one"),
    ],
)
def test_finding_a_bad_or_internal_webhook_url_is_refused_when_saved(settings, url, says):
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = ()
    with pytest.raises(SettingsInvalid) as refused:
        notify_checked({"webhooks": [{"url": url, "secret": SECRET}]}, current={})
    assert says in refused.value.errors["webhooks[0].url"]
    with pytest.raises(SettingsInvalid):
        notify_checked({"approvals": {"webhooks": [{"url": url}]}}, current={})


@pytest.mark.django_db
def test_finding_an_ipv6_typo_on_the_credentials_page_is_a_form_error_not_500(client, recipient):
    recipient("ledger")
    client.force_login(make_user("ada-hooks", "admin"))
    from leaseboard.core.models import Recipient

    pk = Recipient.objects.get(name="ledger").pk
    r = client.post(f"/settings/recipients/{pk}/webhook", {"url": "http://[::1"})
    assert r.status_code == 200
    assert b"not a URL" in r.content
    assert Recipient.objects.get(name="ledger").webhook_url == ""


@pytest.mark.django_db
@pytest.mark.parametrize("email", ["ops@example.com\r\nBcc: attacker@evil.example", "a b@x.org"])
def test_an_email_target_with_a_line_break_is_refused_when_saved(email):
    with pytest.raises(SettingsInvalid) as refused:
        notify_checked({"emails": [email]}, current={})
    assert "emails[0]" in refused.value.errors


# -- sent: the policy again, isolation, backoff, dead letters -------------------------------


@pytest.mark.django_db
def test_finding_one_bad_hook_neither_crashes_nor_delays_another_targets_notice(
    scene, receivers, monkeypatch
):
    """The CR LF URL raised httpx.InvalidURL (not an HTTPError) out of the task; the other
    recipient's notice waited until the bad hook was cleared."""
    good, failing = receivers(), receivers(500)
    approvals_to(scene.lease.work_item.queue, CRLF_URL, failing.url, good.url)
    effect = waiting_effect(scene)
    monkeypatch.setattr(notifications, "backoff_s", lambda attempt: 60.0)
    before = timezone.now()
    approval_notices_deliver_due()  # never raises
    rows = {n.target: n for n in ApprovalNotice.objects.filter(effect=effect)}
    assert len(good.calls) == 1 and rows[good.url].status == "delivered"
    bad = rows[CRLF_URL]
    assert bad.status == "dead" and "control characters" in bad.last_error
    retrying = rows[failing.url]
    assert (retrying.status, retrying.last_error) == ("pending", "HTTP 500")
    assert retrying.due_at >= before + timedelta(seconds=59)  # backoff, not a storm
    approval_notices_deliver_due()  # nothing is due again at once
    assert len(failing.calls) == 1 and len(good.calls) == 1


@pytest.mark.django_db
def test_finding_webhooks_to_internal_services_are_refused_at_send_time_alike(
    scene, settings, receivers
):
    """127.0.0.1:6379 (Redis) and :5432 (PostgreSQL) answered differently: a port oracle.
    Saved before the policy (or by a name that resolves inside), they are refused after
    resolution, each with the same words, and nothing is sent."""
    local = receivers()
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = ()
    port = local.url.split(":")[2].split("/")[0]
    targets = ["http://127.0.0.1:6379/", "http://127.0.0.1:5432/", f"http://localhost:{port}/h"]
    approvals_to(scene.lease.work_item.queue, *targets)
    effect = waiting_effect(scene)
    approval_notices_deliver_due()
    rows = list(ApprovalNotice.objects.filter(effect=effect))
    assert {n.status for n in rows} == {"dead"}
    assert len({n.last_error for n in rows}) == 1 and "not a public one" in rows[0].last_error
    assert local.calls == []


@pytest.mark.django_db
def test_allow_listed_internal_services_are_told_apart_no_better_than_coarsely(scene):
    approvals_to(scene.lease.work_item.queue, "http://127.0.0.1:6379/", "http://127.0.0.1:9/")
    effect = waiting_effect(scene)
    approval_notices_deliver_due()
    errors = {n.last_error for n in ApprovalNotice.objects.filter(effect=effect)}
    assert errors <= {"could not connect", "timed out", "the request failed (no HTTP answer)"}
    assert not any("Error" in e or "[Errno" in e for e in errors), errors


@pytest.mark.django_db
def test_finding_a_target_removed_from_the_configuration_gets_nothing_more(scene, receivers):
    hook = receivers(500)
    queue = scene.lease.work_item.queue
    approvals_to(queue, hook.url)
    effect = waiting_effect(scene)
    approval_notices_deliver_due()
    assert len(hook.calls) == 1  # failed once, due again after its backoff
    approvals_to(queue)  # the admin removes it
    ApprovalNotice.objects.filter(effect=effect).update(due_at=timezone.now())
    approval_notices_deliver_due()
    assert len(hook.calls) == 1
    notice = ApprovalNotice.objects.get(effect=effect)
    assert (notice.status, notice.last_error) == ("failed", notifications.REMOVED)


@pytest.mark.django_db
def test_an_alert_webhook_removed_since_the_fan_out_is_not_posted(agent, receivers, settings):
    # With a fallback secret the old code signed with it and posted to the removed URL.
    settings.LEASEBOARD_WEBHOOK_SECRET = "whsec_fallback_for_every_hook"
    hook = receivers()
    Queue.objects.filter(name="default").update(
        notify={"webhooks": [{"url": hook.url, "secret": SECRET}]}
    )
    lease = leased_item(agent()[0], "removed-1")
    opened = lease_alert(
        lease, Alert.Kind.JEOPARDY, "in jeopardy", due_at_ms=1, now_ms=lease.granted_at_ms + 1
    )
    alerts_open([opened])
    alert = Alert.objects.get(dedupe_key=opened.dedupe_key)
    (delivery,) = notifications.alert_deliveries_pending(alert_id=alert.id)
    Queue.objects.filter(name="default").update(notify={})
    assert notifications.webhook_deliver(delivery_id=delivery.id) is None
    delivery.refresh_from_db()
    assert (delivery.status, hook.calls) == ("failed", [])


@pytest.mark.django_db(transaction=True)
def test_finding_each_approver_notice_is_posted_once_however_many_runs_race(scene, receivers):
    """3 notices were posted 5 times: runs overlapped (the sweep's and the commit's)."""
    slow = receivers()
    original = slow.server.RequestHandlerClass.do_POST

    def slowly(handler: Any) -> None:
        time.sleep(0.3)
        original(handler)

    slow.server.RequestHandlerClass.do_POST = slowly  # type: ignore[method-assign]
    approvals_to(scene.lease.work_item.queue, slow.url)
    for key in ("race-1", "race-2", "race-3"):
        waiting_effect(scene, key=key)

    def run_once() -> None:
        try:
            approval_notices_deliver_due()
        finally:
            connection.close()

    runs = [threading.Thread(target=run_once) for _ in range(3)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=30)
    posted = [json.loads(body)["text"] for _, body in slow.calls]
    assert len(posted) == 3, posted
    assert ApprovalNotice.objects.filter(status="delivered").count() == 3


# -- what approvers are sent ------------------------------------------------------------------


BCC_TARGET = "o2\nBcc: attacker@evil.example"
SLACK_TARGET = "o2` <http://evil.example/approve|Open the decision page> `*bold* <!channel>"


@pytest.mark.django_db
def test_finding_an_agent_chosen_target_never_reaches_an_email_header(scene, settings):
    """The target with "\\nBcc:" made send_mail raise BadHeaderError: no approver was told."""
    settings.LEASEBOARD_PUBLIC_URL = "https://leaseboard.example.com"
    approvals_to(scene.lease.work_item.queue, emails=["approvals@example.com"])
    effect = waiting_effect(scene, target=BCC_TARGET)
    approval_notices_deliver_due()
    (message,) = mail.outbox
    assert "evil" not in message.subject and "o2" not in message.subject
    assert message.bcc == [] and "Bcc" not in str(message.message()).split("\n\n", 1)[0]
    assert json.dumps(BCC_TARGET) in message.body  # shown, quoted on one line
    assert "\nBcc: attacker" not in message.body
    effect.refresh_from_db()
    assert effect.approver_reached_at_ms is not None


@pytest.mark.django_db
def test_finding_an_agent_chosen_target_cannot_add_a_link_to_the_slack_message(scene, settings):
    settings.LEASEBOARD_PUBLIC_URL = "https://leaseboard.example.com"
    effect = waiting_effect(scene, target=SLACK_TARGET)
    message = approval_message(effect, "request", now_ms=effect.proposed_at_ms)
    ours = f"https://leaseboard.example.com/takeovers/effects/{effect.id}"

    def texts(node: Any, kind: str) -> list[str]:
        if isinstance(node, dict):
            found = [node["text"]] if node.get("type") == kind else []
            return found + [t for v in node.values() for t in texts(v, kind)]
        if isinstance(node, list):
            return [t for v in node for t in texts(v, kind)]
        return []

    mrkdwn = texts(message, "mrkdwn") + [message["text"]]
    assert not any("evil" in t or "<!channel>" in t or "`" in t for t in mrkdwn), mrkdwn
    links = [part.split("|")[0] for t in mrkdwn for part in t.split("<")[1:]]
    assert links == [ours], links  # the only link in mrkdwn is ours
    plain = texts(message, "plain_text")
    assert any(SLACK_TARGET in t for t in plain)  # shown as written, where nothing is parsed


@pytest.mark.django_db
def test_finding_a_request_no_approver_was_told_of_never_defaults_to_approve(
    scene, receivers, client
):
    """The e-mail failed, nobody was told, and on_timeout=approve authorized it anyway."""
    refusing = receivers(500, 500, 500)
    approvals_to(scene.lease.work_item.queue, refusing.url)
    effect = waiting_effect(scene, decide_within_ms=60_000, on_timeout="approve")
    approval_notices_deliver_due()
    client.force_login(make_user("abe-page", "approver"))
    page = client.get(f"/takeovers/effects/{effect.id}").content.decode()
    assert "no notice has reached an approver" in page
    age_approval(effect.id, 61_000)
    sweep_run()
    effect.refresh_from_db()
    assert (effect.decision, effect.refusal_code) == ("refused", "approval_expired")
    assert "no notice reached an approver" in effect.refusal_detail
    assert not effect.fencing_token


@pytest.mark.django_db
def test_the_delivery_log_shows_dead_letters(scene, client, settings):
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = ()
    approvals_to(scene.lease.work_item.queue, "http://127.0.0.1:6379/")
    waiting_effect(scene)
    approval_notices_deliver_due()
    client.force_login(make_user("ada-log", "admin"))
    page = client.get("/settings/deliveries/?status=dead")
    assert page.status_code == 200
    body = page.content.decode()
    assert 'class="status-dead"' in body and "http://127.0.0.1:6379/" in body
    assert "dead 1" in body
    assert client.get("/settings/deliveries/?status=nonsense").status_code == 200


def test_the_backoff_grows_is_jittered_and_never_retries_at_once():
    for attempt in (1, 3, 8, 20):
        step = min(600.0, 2.0**attempt)
        waits = [notifications.backoff_s(attempt) for _ in range(200)]
        assert all(step / 2 <= w <= step for w in waits)
        assert len({round(w, 6) for w in waits}) > 100  # spread, not one instant for all
