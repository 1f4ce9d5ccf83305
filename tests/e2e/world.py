"""A small fleet with something on every page, built through the core and workflow
services (the browser tests' test data): live, jeopardy and expired leases, alerts of
several kinds, a takeover waiting for an approver, an effect waiting for approval with a
payment payload, an approved intervention, a break-glass one waiting for review, and the
audit entries all of that wrote. Plain functions, like tests/builders.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# deliberate: the builders a browser world needs, as test_browser_operators imports them.
from tests.builders import (
    age_lease,
    effect_rules,
    effect_under,
    grant_break_glass,
    leased_item,
    make_user,
    stale_effect_on,
)


@dataclass
class World:
    users: dict[str, Any]
    agents: dict[str, Any]
    tokens: dict[str, str]
    keys: dict[str, str] = field(default_factory=dict)
    ids: dict[str, Any] = field(default_factory=dict)


def build_world(agent) -> World:  # type: ignore[no-untyped-def]
    from leaseboard.core.authority import Actor
    from leaseboard.core.models import Queue
    from leaseboard.core.services.effects import effect_report_outcome
    from leaseboard.sweeps.services import sweep_run
    from leaseboard.takeovers.services import (
        takeover_approve,
        takeover_break_glass,
        takeover_request,
    )

    users = {
        "operator": make_user("olga", "operator"),
        "approver": make_user("abe", "approver"),
        "manager": make_user("mia", "manager"),
        "admin": make_user("ada", "admin"),
        "nobody": make_user("nora"),
    }
    grant_break_glass(users["operator"])
    agents, tokens = {}, {}
    for name in ("refund-bot", "deploy-bot", "ledger-bot"):
        agents[name], tokens[name] = agent(name)
    queue, _ = Queue.objects.get_or_create(name="payments")
    effect_rules(queue, ("payment.send", "require_approval"))
    w = World(users=users, agents=agents, tokens=tokens)

    for i in range(6):
        leased_item(agents["refund-bot"], key=f"refund-{i:03d}", queue="payments")
    jeopardy = leased_item(agents["deploy-bot"], key="deploy-7")
    age_lease(jeopardy.id, jeopardy.jeopardy_after_ms + 500)
    gone = leased_item(agents["deploy-bot"], key="deploy-8")
    # Its outcome never reported: once expired, the item is blocked (needs reconciliation).
    effect_under(
        gone,
        agents["deploy-bot"],
        "deploy-8-a",
        kind="deploy.rollout",
        target="cluster-eu-west-1/payments-api",
    )
    age_lease(gone.id, gone.ttl_ms + 1_000)
    sweep_run()  # the jeopardy and expiry alerts
    leased_item(agents["ledger-bot"], key="ledger-1")
    stale_effect_on("ledger-1", agents["ledger-bot"], agents["deploy-bot"])  # a stale_effect alert

    # An effect waiting for approval, with a payment payload.
    pay = leased_item(agents["ledger-bot"], key="pay-42", queue="payments")
    effect = effect_under(
        pay,
        agents["ledger-bot"],
        "pay-42-a",
        kind="payment.send",
        target="invoice-42",
        payload={"amount": "125.00", "currency": "EUR", "payee": "ACME GmbH"},
    )
    w.ids["waiting_effect"] = effect.id

    # A takeover waiting for an approver; one approved (with an unknown outcome to
    # reconcile under the operator's standing); one break-glass waiting for review.
    op, ap = Actor.human(users["operator"]), Actor.human(users["approver"])
    waiting = takeover_request(
        work_key="refund-001", actor=op, reason_category="stuck", reason_text="loops on step 3"
    )
    w.ids["waiting_request"] = waiting.id
    held = leased_item(agents["refund-bot"], key="refund-900", queue="payments")
    fx = effect_under(held, agents["refund-bot"], "r900", kind="payment.refund", target="order-900")
    effect_report_outcome(effect_id=fx.id, executor=agents["refund-bot"], outcome="unknown")
    req = takeover_request(
        work_key="refund-900",
        actor=op,
        reason_category="unknown_outcome",
        reason_text="refund outcome unknown",
    )
    iv = takeover_approve(request_pk=req.id, actor=ap, note="go")
    w.ids["intervention"] = iv.id
    bg = takeover_break_glass(
        work_key="refund-002", actor=op, reason_category="incident", reason_text="outage"
    )
    w.ids["break_glass"] = bg.id
    w.keys = {"live": "refund-003", "jeopardy": "deploy-7", "expired": "deploy-8"}
    _settings_world(users["admin"])
    return w


def _settings_world(admin) -> None:  # type: ignore[no-untyped-def]
    """What makes the settings pages long and wide: a recipient with a long webhook URL
    and one without, a queue's notification webhook, a rule with a long condition, and a
    rule change (four-eyes) another admin proposed, waiting for this one."""
    from django.test import override_settings

    from leaseboard.core.authority import Actor
    from leaseboard.core.services.recipients import recipient_create, recipient_webhook_set
    from leaseboard.domain.policy import RuleSpec
    from leaseboard.policy.services import queues, rules

    recipient_create(name="ledger-service")
    recipient_webhook_set(
        name="ledger-service",
        url="https://ledger.internal.example.com/hooks/leaseboard/epoch-advance"
        "?tenant=acme-payments-eu-west-1&signature-version=2",
    )
    recipient_create(name="records-archive-with-a-rather-long-name")
    ada, adam = Actor.human(admin), Actor.human(make_user("adam", "admin"))
    hook = "https://hooks.example.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    queues.queue_notify_update(name="payments", notify={"webhooks": [{"url": hook}]}, actor=ada)
    long_rule = RuleSpec(
        "large-cross-border-payments",
        "payment.*",
        when="payload.amount_cents > 50000 && payload.currency != 'EUR' "
        "&& !evidence.has_checkpoint",
        decision="require_approval",
    )
    rules.rule_set_change(
        queue_name="payments", rules=[long_rule], default="require_approval", actor=ada
    )
    with override_settings(LEASEBOARD_POLICY_FOUR_EYES=True):
        rules.rule_set_change(
            queue_name="payments",
            rules=[long_rule, RuleSpec("no-wipes", "db.wipe", decision="deny")],
            default="require_approval",
            actor=adam,
            summary="deny database wipes in payments",
        )


def pages_for(role: str, w: World) -> list[tuple[str, str]]:
    """(name, path) of every page a person in `role` can open, with data on it."""
    common = [
        ("live", "/"),
        ("live-sorted", "/?sort=due"),
        ("alerts", "/alerts/"),
        ("alerts-list", "/alerts/?view=list&state=all"),
        ("work-item", f"/work/{w.keys['live']}"),
        ("executor", f"/executors/{w.agents['refund-bot'].id}"),
        ("fleet", "/fleet/"),
        ("blocked", "/blocked/"),
        ("not-found", "/work/no-such-item"),
    ]
    own = {
        "operator": [
            ("standing", "/takeovers/standing/"),
            ("request", f"/takeovers/request/{w.keys['live']}"),
            ("bulk-takeover", "/takeovers/bulk?key=refund-003&key=refund-004"),
            ("bulk-revoke", "/leases/revoke?key=refund-003&key=refund-004"),
            ("bulk-hold", "/leases/hold?match=1&holder=refund-bot"),
            ("bulk-acknowledge", "/alerts/acknowledge-matching?match=1"),
            ("work-item-standing", "/work/refund-900"),  # the checkpoint form under standing
            ("forbidden", "/audit/"),
        ],
        "approver": [
            ("pending", "/takeovers/pending/"),
            ("effect", f"/takeovers/effects/{w.ids['waiting_effect']}"),
            ("bulk-revoke", "/leases/revoke?key=refund-003"),
            ("bulk-decide", "/takeovers/effects/decide-matching?kind=payment.refund"),
        ],
        "admin": [
            ("settings", "/settings/"),
            ("settings-queue", "/settings/queues/payments/"),
            ("settings-queue-new", "/settings/queues/new"),
            ("settings-notify", "/settings/queues/payments/notify"),
            ("settings-rule", "/settings/queues/payments/rules/new"),
            ("settings-rule-edit", "/settings/queues/payments/rules/large-cross-border-payments/"),
            ("settings-explain", "/settings/explain"),
            ("settings-global", "/settings/global/"),
            ("settings-changes", "/settings/changes/"),
            ("settings-history", "/settings/history/"),
            ("settings-people", "/settings/people/"),
            ("settings-credentials", "/settings/credentials/"),
        ],
        "manager": [
            ("audit", "/audit/"),
            ("interventions", "/takeovers/interventions/"),
            ("intervention", f"/takeovers/interventions/{w.ids['intervention']}"),
            ("review", f"/takeovers/interventions/{w.ids['break_glass']}"),
            ("summary", "/takeovers/interventions/summary"),
        ],
    }
    return common + own.get(role, [])
