"""Compiled rule sets (leaseboard.core.services.rule_sets), on real PostgreSQL: a queue's
rules compiled at its policy version, in order, with its default; compiled once per
version (asked again, the same object), and again after a change raises the version; the
clock, version and name an effect's decision reads in one query; the rules for every
queue are empty and allow before anyone declares them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaseboard.core.clock import db_now_ms
from leaseboard.core.models import Queue

# deliberate: an import list and the module marks (alike in shape only).
from leaseboard.core.services.rule_sets import (
    QueuePolicy,
    clock_and_policy_version,
    global_head,
    global_rule_specs,
    queue_policy,
)
from leaseboard.domain.policy import RuleSpec
from tests.builders import effect_rules

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_queues_rules_are_compiled_at_its_version_in_order_with_its_default() -> None:
    queue = Queue.objects.get(name="default")
    effect_rules(
        queue,
        ("payment.*", "require_approval"),
        RuleSpec(name="big", kind="*", when="payload.amount_cents > 500", decision="deny"),
        default="allow",
    )
    queue.refresh_from_db()
    policy = queue_policy(queue.id)
    assert isinstance(policy, QueuePolicy)
    assert (policy.queue_name, policy.version) == ("default", queue.policy_version)
    assert [(r.spec.name, r.spec.decision) for r in policy.rule_set.rules] == [
        ("r1", "require_approval"),
        ("big", "deny"),
    ]
    assert policy.rule_set.default == "allow"
    assert policy.reads  # the condition's variables, so a decision reads only those


def test_a_version_is_compiled_once_and_a_change_compiles_the_next() -> None:
    queue = Queue.objects.get(name="default")
    effect_rules(queue, ("k.*", "deny"))
    first = queue_policy(queue.id)
    assert queue_policy(queue.id) is first
    with CaptureQueriesContext(connection) as read:
        assert queue_policy(queue.id, head=first.version) is first
    assert len(read.captured_queries) == 0  # the caller had just read the version
    effect_rules(queue, ("k.*", "allow"), ("j.*", "deny"))
    second = queue_policy(queue.id)
    assert second.version == first.version + 1
    assert [r.spec.kind for r in second.rule_set.rules] == ["k.*", "j.*"]


def test_the_clock_version_and_name_come_in_one_read() -> None:
    queue = Queue.objects.get(name="default")
    before = db_now_ms()
    with CaptureQueriesContext(connection) as read:
        now, version, name = clock_and_policy_version(queue.id)
    assert len(read.captured_queries) == 1
    assert (version, name) == (queue.policy_version, "default")
    assert before <= now <= db_now_ms()


def test_before_anyone_declares_them_the_rules_for_every_queue_allow_everything() -> None:
    assert global_head() == (0, "allow")
    assert global_rule_specs() == []
    policy = queue_policy(Queue.objects.get(name="default").id)
    assert policy.global_rules.rules == () and policy.global_version == 0
