"""A checkpoint under standing in real Chromium (issue 28, point 9): after a takeover the
person holding standing writes a checkpoint from the work item page; a document that is not
JSON is refused in plain words and the typed text is still in the form; fixed, it is saved
at the standing's epoch and listed, and the next agent's acquire returns it."""

from __future__ import annotations

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import Checkpoint
from leaseboard.takeovers import services
from tests.builders import leased_item, make_user, request_for
from tests.e2e.pages import shot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_person_with_standing_writes_a_checkpoint_from_the_work_item_page(
    live_server, browser, agent, settings
):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    olga = make_user("olga", "operator")
    abe = make_user("abe", "approver")
    bot, _ = agent("refund-bot")
    leased_item(bot, key="refund-77", ttl_ms=600_000)
    req = request_for("refund-77", olga)
    iv = services.takeover_approve(request_pk=req.id, actor=Actor.human(abe), note="ok")

    op = sign_in(browser, live_server.url, "olga")
    op.goto(f"{live_server.url}/work/refund-77")
    form = op.locator("#checkpoint-form")
    assert f"Write a checkpoint under your standing (epoch {iv.epoch})" in form.inner_text()
    op.fill("#checkpoint-data", '{"step": "receipt", "order": 77')
    op.fill("#checkpoint-note", "refund sent by hand")
    op.click("#checkpoint-form button[type=submit]")
    op.wait_for_selector(".msg-error")
    assert "the checkpoint is not JSON" in op.inner_text(".msg-error")
    assert op.input_value("#checkpoint-data") == '{"step": "receipt", "order": 77'
    assert op.input_value("#checkpoint-note") == "refund sent by hand"
    assert not Checkpoint.objects.exists()

    op.fill("#checkpoint-data", '{"step": "receipt", "order": 77}')
    op.click("#checkpoint-form button[type=submit]")
    op.wait_for_selector(".msg-success")
    assert f"Checkpoint #1 saved at epoch {iv.epoch}" in op.inner_text(".msg-success")
    assert op.input_value("#checkpoint-data") == ""  # sent: nothing kept
    assert f"#1 at epoch {iv.epoch}" in op.inner_text("main")
    shot(op, "standing-checkpoint")
    cp = Checkpoint.objects.get()
    assert (cp.epoch, cp.data) == (iv.epoch, {"step": "receipt", "order": 77})
