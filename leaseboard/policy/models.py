"""Changes waiting for a second admin (four-eyes), and the four-eyes setting itself.

With four-eyes on, what would loosen a rule or empower a person is a proposal that a second
admin — never its proposer, nor the person it is about — approves: a rule set (a queue's,
or the rules for every queue), a grant of roles, break-glass or sign-in, a new person, a
password reset, and turning four-eyes off. A rule-set proposal is the whole set after the
change, against the version it was proposed on: approving a proposal the rules have moved
on from is refused."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from leaseboard.core.models import Queue


class PolicyChange(models.Model):
    # deliberate: vocabularies declared member by member; alike in shape only.
    class Status(models.TextChoices):
        PENDING = "pending"
        APPLIED = "applied"
        REJECTED = "rejected"
        WITHDRAWN = "withdrawn"

    class Kind(models.TextChoices):
        RULES = "rules"  # a queue's rule set, or (queue NULL) the rules for every queue
        PERSON = "person"  # a person's roles, break-glass, sign-in (payload: the new state)
        PERSON_CREATE = "person_create"  # a new person (payload: username, email, roles)
        PASSWORD_RESET = "password_reset"  # a one-time set-password link for `subject`
        FOUR_EYES = "four_eyes"  # four-eyes turned off (payload: {"on": false})

    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.RULES)
    queue = models.ForeignKey(
        Queue, null=True, blank=True, on_delete=models.CASCADE, related_name="policy_changes"
    )
    base_version = models.PositiveIntegerField(default=0)
    rules = models.JSONField(default=list)  # [RuleSpec.as_dict(), ...] in order
    default_decision = models.CharField(max_length=20, blank=True, default="")
    # The person a change is about (never its approver), and what it would make of them.
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    payload = models.JSONField(default=dict, blank=True)
    summary = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    requested_by_name = models.CharField(max_length=150)
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_by_name = models.CharField(max_length=150, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=1000, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "applied", "rejected", "withdrawn"]),
                name="policy_change_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    kind__in=["rules", "person", "person_create", "password_reset", "four_eyes"]
                ),
                name="policy_change_kind_valid",
            ),
            # One proposal at a time per queue: the next one is made on top of the outcome.
            models.UniqueConstraint(
                fields=["queue"],
                condition=Q(status="pending"),
                name="policy_change_one_pending_per_queue",
            ),
            # ... and for the rules for every queue, for each person, for four-eyes.
            models.UniqueConstraint(
                fields=["kind"],
                condition=Q(status="pending", kind="rules", queue__isnull=True),
                name="policy_change_one_pending_global_rules",
            ),
            models.UniqueConstraint(
                fields=["subject", "kind"],
                condition=Q(status="pending", subject__isnull=False),
                name="policy_change_one_pending_per_person",
            ),
            models.UniqueConstraint(
                fields=["kind"],
                condition=Q(status="pending", kind="four_eyes"),
                name="policy_change_one_pending_four_eyes",
            ),
        ]

    def __str__(self) -> str:
        return f"change {self.pk} ({self.kind}): {self.summary}"

    @property
    def what(self) -> str:
        """What the change is about, in words, for the changes page and messages."""
        if self.kind == self.Kind.RULES:
            return f"rules of {self.queue.name}" if self.queue else "rules for every queue"
        if self.kind == self.Kind.PERSON_CREATE:
            return f"new person {self.payload.get('username', '?')}"
        if self.kind == self.Kind.FOUR_EYES:
            return "four-eyes"
        who = self.subject.get_username() if self.subject else "?"
        return f"password of {who}" if self.kind == self.Kind.PASSWORD_RESET else f"person {who}"


class FourEyes(models.Model):
    """The one row (id 1) saying whether four-eyes is on, for every process alike
    (docs/design.md §9: a setting in the database, not a per-process environment
    variable). Turned on by one admin; turned off only by a proposal a second admin
    approves. Written only by leaseboard.policy.services.four_eyes."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    on = models.BooleanField(default=False)
    changed_at = models.DateTimeField(null=True, blank=True)
    changed_by_name = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="four_eyes_one_row")]

    def __str__(self) -> str:
        return f"four-eyes {'on' if self.on else 'off'}"


class SignInPolicy(models.Model):
    """The one row (id 1) saying how people sign in (config as code's `[sso]`): which
    claim of the identity provider lists a person's groups, and whether local passwords
    still sign anyone in. The provider itself (issuer, client) comes from the
    environment, since its secret must not be in a file or the database."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    groups_claim = models.CharField(max_length=100, default="groups")
    local_passwords = models.BooleanField(default=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="sign_in_policy_one_row")]

    def __str__(self) -> str:
        return f"groups from {self.groups_claim!r}, local passwords {self.local_passwords}"


class SsoGroup(models.Model):
    """A group of the identity provider and what it gives its members, as `role` and
    `role:queue` entries (leaseboard.policy.services.people.grants_parsed). Re-evaluated at
    each sign-in: a person's roles are those their groups give, nothing kept."""

    name = models.CharField(max_length=200, unique=True)
    grants = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"{self.name} -> {', '.join(self.grants)}"


class SsoIdentity(models.Model):
    """Who a person is at the identity provider: the issuer and the subject (`sub`), the
    only stable identifier (an email or a username may be reused). Never matched by name."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"
