"""The plan of a configuration's tables (leaseboard/policy/services/config_tables.py): a
valid queue table becomes a queue plan and its changes, in the order the plan prints them;
every problem lands under its path in the document and leaves no plan behind."""

from __future__ import annotations

import pytest

from leaseboard.policy.services.config_tables import Plan, plan_global, plan_queue

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_a_new_queue_table_is_a_create_with_its_rules_and_notify() -> None:
    plan, errors = Plan(), {}
    table = {
        "capacity": 3,
        "notify": {"emails": ["ops@example.com"]},
        "default_decision": "deny",
        "rules": [{"name": "refunds", "kind": "payment.*", "decision": "allow"}],
    }
    plan_queue("payments", table, None, plan, errors)
    assert errors == {}
    [queue] = plan.queues
    assert (queue.name, queue.exists, queue.default) == ("payments", False, "deny")
    assert queue.values["capacity"] == 3 and [r.name for r in queue.rules] == ["refunds"]
    assert [(c.what, c.action) for c in plan.changes] == [
        ("queue payments", "create"),
        ("rules of payments", "update"),
        ("notify of payments", "create"),
    ]
    assert plan.text().splitlines()[0].startswith("+ queue payments: ")


@pytest.mark.parametrize(
    ("table", "path"),
    [
        ({"colour": "red"}, "queues.payments.colour"),
        ({"envelope": {"scope": {}}}, "queues.payments.envelope.scope"),
        ({"capacity": -1}, "queues.payments.capacity"),
        ({"rules": "allow everything"}, "queues.payments.rules"),
        ({"default_decision": "maybe"}, "queues.payments.default_decision"),
    ],
)
def test_each_problem_is_under_its_path_and_leaves_no_plan(table: dict, path: str) -> None:
    plan, errors = Plan(), {}
    plan_queue("payments", table, None, plan, errors)
    assert path in errors, errors
    assert plan.queues == [] and plan.changes == []


def test_a_queue_that_is_not_a_table_or_badly_named_is_refused_whole() -> None:
    plan, errors = Plan(), {}
    plan_queue("payments", ["not", "a", "table"], None, plan, errors)
    plan_queue("no spaces allowed", {}, None, plan, errors)
    assert set(errors) == {"queues.payments", "queues.no spaces allowed"}
    assert plan.queues == []


def test_the_rules_for_every_queue_are_planned_or_refused_under_global() -> None:
    plan, errors = Plan(), {}
    plan_global(
        {"global": {"rules": [{"name": "no-deletes", "kind": "*.delete", "decision": "deny"}]}},
        plan,
        errors,
    )
    assert errors == {} and plan.global_rules is not None
    specs, default = plan.global_rules
    assert [s.name for s in specs] == ["no-deletes"] and default == "allow"
    assert [c.what for c in plan.changes] == ["rules for every queue"]

    plan, errors = Plan(), {}
    plan_global({"global": {"rules": "deny all", "extra": 1}}, plan, errors)
    assert set(errors) == {"global.extra", "global.rules"} and plan.global_rules is None
    plan_global({}, plan, errors)  # no [global]: nothing to plan, nothing wrong
    assert plan.changes == []
