"""Commit-time rules: a queue's ordered rules, the first match deciding an effect
(leaseboard.domain.policy decides; leaseboard.core.services.policy gathers the facts).

A rule set is replaced whole, in one transaction that raises `Queue.policy_version`, so a
rule's name (unique in its queue), not its row id, is how an effect names the rule that
decided it.

The rules for every queue (`queue` NULL, with their default and version on the one
GlobalPolicy row) are tried before a queue's own, which can only tighten them
(leaseboard.domain.policy.decide_layered). A change to them raises their version and every
queue's `policy_version` in the same transaction, so a queue's version names the whole rule
set its effects are decided under."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from leaseboard.core.models.choices import text_choices, values
from leaseboard.core.models.work import Queue
from leaseboard.domain.policy import RuleSpec
from leaseboard.domain.reconciliation import PolicyDecision


class EffectRule(models.Model):
    Decision = text_choices(PolicyDecision, module=__name__, qualname="EffectRule.Decision")

    # NULL: a rule for every queue (GlobalPolicy), tried before any queue's own.
    queue = models.ForeignKey(
        Queue, null=True, blank=True, on_delete=models.CASCADE, related_name="rules"
    )
    position = models.PositiveIntegerField()  # 1, 2, 3...: the order rules are tried in
    name = models.CharField(max_length=80)
    kind = models.CharField(max_length=500, default="*")  # glob over Effect.kind
    target = models.CharField(max_length=500, default="*")  # glob over Effect.target
    condition = models.TextField(blank=True, default="")  # CEL; empty: always
    decision = models.CharField(max_length=20, choices=Decision.choices)
    note = models.CharField(max_length=500, blank=True, default="")
    # require_approval: how long an approver has (null: the configured default), and what
    # the request becomes when nobody decided in time.
    decide_within_ms = models.PositiveIntegerField(null=True, blank=True)
    on_timeout = models.CharField(max_length=10, default="reject")

    class Meta:
        ordering = ["queue", "position"]
        constraints = [
            models.UniqueConstraint(fields=["queue", "name"], name="effect_rule_name_unique"),
            models.UniqueConstraint(
                fields=["queue", "position"], name="effect_rule_position_unique"
            ),
            # NULLs are distinct in the two above: the rules for every queue need their own.
            models.UniqueConstraint(
                fields=["name"],
                condition=Q(queue__isnull=True),
                name="effect_rule_global_name_unique",
            ),
            models.UniqueConstraint(
                fields=["position"],
                condition=Q(queue__isnull=True),
                name="effect_rule_global_position_unique",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=values(PolicyDecision)),
                name="effect_rule_decision_valid",
            ),
            models.CheckConstraint(
                condition=Q(on_timeout__in=["reject", "approve"]),
                name="effect_rule_on_timeout_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.queue_id}:{self.position}:{self.name}"

    def spec(self) -> RuleSpec:
        return RuleSpec(
            name=self.name,
            kind=self.kind,
            target=self.target,
            when=self.condition,
            decision=self.decision,
            note=self.note,
            decide_within_ms=self.decide_within_ms,
            on_timeout=self.on_timeout,
        )


class GlobalPolicy(models.Model):
    """The one row (id 1) of the rules for every queue: their default decision (allow: no
    floor) and a version raised with every change of them (migration 0019 creates it)."""

    Decision = text_choices(PolicyDecision, module=__name__, qualname="GlobalPolicy.Decision")

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    default_decision = models.CharField(
        max_length=20, choices=Decision.choices, default=PolicyDecision.ALLOW.value
    )
    version = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="global_policy_one_row"),
            models.CheckConstraint(
                condition=Q(default_decision__in=values(PolicyDecision)),
                name="global_policy_default_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"rules for every queue, version {self.version}"


class EffectKindDisplay(models.Model):
    """How pages show an effect kind's amount (leaseboard.domain.amounts.DisplayHint):
    which payload field holds it in minor units, its currency and minor units. One row a
    kind glob; the most specific glob matching a kind applies. Config as code's
    `[effect_kinds."GLOB"]`; written only by leaseboard.policy.services.display_hints, read by
    leaseboard.core.display_hints."""

    kind = models.CharField(max_length=100, unique=True)
    amount_field = models.CharField(max_length=100)
    currency = models.CharField(max_length=3)
    minor_units = models.PositiveSmallIntegerField(default=2)
    currency_field = models.CharField(max_length=100, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(minor_units__lte=4), name="effect_kind_display_minor_units_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}: {self.amount_field} in {self.currency}"
