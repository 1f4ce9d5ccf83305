"""Forms keep what was typed after a refusal, on the pages that post and redirect (issue
28, point 9): the work item page's hold, revoke and checkpoint forms, the standing page's
acts, the inbox's note. Each test posts bad input, follows the redirect, and finds the
input echoed back (escaped)."""

from __future__ import annotations

import pytest

from leaseboard.core.models import Checkpoint
from leaseboard.web.kept import KEEP_SECONDS, SESSION_KEY
from tests.builders import effect_under, leased_item, make_user, signed_in, standing_on

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def test_the_hold_form_shows_the_typed_reason_again_after_a_refusal(agent):
    bot, _ = agent("loopy")
    lease = leased_item(bot, key="k-1")
    client = signed_in(make_user("olga", "operator"))
    typed = {"reason_category": "", "reason_text": "doubles <every> refund", "next": "/work/k-1"}
    r = client.post(f"/leases/{lease.id}/hold", typed)
    assert r.status_code == 302 and r["Location"] == "/work/k-1"
    page = client.get("/work/k-1").content.decode()
    hold = page[page.index('id="hold-form"') : page.index("</form>", page.index('id="hold-form"'))]
    assert "doubles &lt;every&gt; refund</textarea>" in hold
    revoke = page[page.index('id="revoke-form"') : page.index('id="hold-form"')]
    assert "doubles" not in revoke  # kept for the form it came from only
    ok = client.post(
        f"/leases/{lease.id}/hold",
        {**typed, "reason_category": "misbehaving"},
    )
    assert ok.status_code == 302


def test_the_revoke_form_keeps_its_category_and_text(agent):
    bot, _ = agent("loopy")
    lease = leased_item(bot, key="k-2")
    client = signed_in(make_user("olga", "operator"))
    client.post(
        f"/leases/{lease.id}/revoke",
        {"reason_category": "misbehaving", "reason_text": "", "next": "/work/k-2"},
    )
    page = client.get("/work/k-2").content.decode()
    revoke = page[page.index('id="revoke-form"') : page.index('id="hold-form"')]
    assert '<option value="misbehaving" selected>' in revoke


def test_the_checkpoint_form_on_the_work_item_page_keeps_a_document_that_is_not_json(people, scene):
    iv = standing_on(scene.key, people)
    client = signed_in(people.operator)
    page = client.get(f"/work/{scene.key}").content.decode()
    assert 'id="checkpoint-form"' in page and f"(epoch {iv.epoch})" in page
    url = f"/takeovers/standing/{iv.lease_id}/checkpoint"
    bad = {
        "epoch": iv.epoch,
        "data": '{"step": "refund',
        "note": "by hand",
        "next": f"/work/{scene.key}",
    }
    r = client.post(url, bad, follow=True)
    html = r.content.decode()
    assert "the checkpoint is not JSON" in html
    assert "{&quot;step&quot;: &quot;refund</textarea>" in html
    assert 'name="note" maxlength="1000" value="by hand"' in html
    r = client.post(url, {**bad, "data": '{"step": "refund"}'}, follow=True)
    assert "Checkpoint #1 saved at epoch" in r.content.decode()
    assert Checkpoint.objects.get().data == {"step": "refund"}
    assert "refund</textarea>" not in client.get(f"/work/{scene.key}").content.decode()
    # Only the person holding the standing is offered the form.
    approver_page = signed_in(people.approver).get(f"/work/{scene.key}").content.decode()
    assert 'id="checkpoint-form"' not in approver_page


def test_the_standing_page_keeps_the_assign_choice_and_the_extension_reason(people, scene):
    iv = standing_on(scene.key, people)
    client = signed_in(people.operator)
    base = {"lease_id": str(iv.lease_id), "epoch": iv.epoch}
    client.post(f"/takeovers/interventions/{iv.pk}/extend", {**base, "minutes": "7", "reason": ""})
    client.post(
        f"/takeovers/interventions/{iv.pk}/effects",
        {**base, "kind": "payment.refund", "target": "", "outcome": "applied", "detail": "x"},
    )
    html = client.get("/takeovers/standing/").content.decode()
    assert f'id="minutes-{iv.pk}" name="minutes" value="7"' in html
    kind = f'id="kind-{iv.pk}" name="kind" required placeholder="payment.refund"'
    assert f'{kind} value="payment.refund"' in html
    assert "<option selected>applied</option>" in html
    # The polled fragment shows it too (the page re-renders itself every few seconds).
    fragment = client.get(
        "/takeovers/standing/", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="standings"
    )
    assert 'value="7"' in fragment.content.decode()


def test_kept_input_expires(people, scene, agent):
    bot, _ = agent("loopy")
    lease = leased_item(bot, key="k-3")
    client = signed_in(make_user("olga", "operator"))
    client.post(f"/leases/{lease.id}/hold", {"reason_category": "", "reason_text": "old words"})
    session = client.session
    kept = session[SESSION_KEY]
    for entry in kept.values():
        entry["at"] -= KEEP_SECONDS + 1
    session[SESSION_KEY] = kept
    session.save()
    assert "old words" not in client.get("/work/k-3").content.decode()


def test_the_inbox_keeps_the_note_when_nothing_was_picked_and_the_effect_page_its_reason(
    agent,
):
    from leaseboard.domain.policy import RuleSpec
    from tests.builders import effect_rules

    bot, _ = agent("refund-bot")
    lease = leased_item(bot, key="rf-1")
    effect_rules(
        lease.work_item.queue,
        RuleSpec(name="refunds", kind="payment.*", decision="require_approval"),
    )
    effect = effect_under(lease, bot, "k1", kind="payment.refund", target="order-1")
    client = signed_in(make_user("abe", "approver"))
    client.post("/takeovers/decide", {"decision": "reject", "note": "freeze until Monday"})
    inbox = client.get("/takeovers/pending/").content.decode()
    assert 'name="note" maxlength="1000" value="freeze until Monday"' in inbox
    r = client.post(
        f"/takeovers/effects/{effect.id}/reject",
        {"note": "over the limit", "digest": "0" * 64, "back": "effect"},
    )
    assert r.status_code == 302
    page = client.get(f"/takeovers/effects/{effect.id}").content.decode()
    assert 'id="reject-note" name="note" maxlength="1000" required value="over the limit"' in page
