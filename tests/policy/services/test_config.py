"""Configuration as code: export from one database, apply on a fresh one (a new SQLite
database, migrated, through `manage.py`), and the same proposals get the same decisions.
A dry run changes nothing; a second apply changes nothing and records nothing; a bad file
is refused whole, each problem under its path."""

from __future__ import annotations

import json

import pytest

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, EffectRule, Queue
from leaseboard.core.services.policy import policy_explain
from leaseboard.domain.policy import RuleSpec
from leaseboard.policy.services import people, queues, rules
from leaseboard.policy.services.common import SettingsInvalid
from leaseboard.policy.services.config import (
    config_apply,
    config_apply_text,
    config_dumps,
    config_export,
    config_loads,
)
from tests.builders import make_user
from tests.processes import manage_on_sqlite

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]

PROPOSALS = [
    ("payments", "payment.refund", "order-1", {"amount_cents": 60000}),
    ("payments", "payment.refund", "order-2", {"amount_cents": 40000}),
    ("payments", "payment.charge", "order-3", {}),
    ("payments", "db.wipe", "prod-users", {}),
    ("payments", "db.wipe", "staging-users", {}),
    ("deploys", "deploy.apply", "prod-eu", {}),
    ("deploys", "deploy.apply", "staging", {"force": True}),
    ("default", "anything", "x", {}),
]


def decisions() -> list[tuple[str, str | None]]:
    out = []
    for queue, kind, target, payload in PROPOSALS:
        e = policy_explain(queue_name=queue, kind=kind, target=target, payload=payload)
        out.append((e.ruling.decision, e.ruling.rule))
    return out


@pytest.fixture
def configured():
    admin = Actor.human(make_user("ada", "admin"))
    make_user("abe", "approver", "operator")
    queues.queue_create(
        name="payments",
        values={
            "capacity": 2,
            "timing": {"ttl_ms": 9000},
            "scopes": {"env": ["prod", "staging"]},
            "leases_per_agent": 3,
        },
        actor=admin,
    )
    queues.queue_create(
        name="deploys",
        values={
            "windows": {
                "tz": "Europe/Berlin",
                "open": [{"days": "mon-fri", "from": "08:00", "to": "18:00"}],
            }
        },
        actor=admin,
    )
    queues.queue_notify_update(
        name="payments",
        notify={"webhooks": [{"url": "https://hooks.example.com/a", "secret": "s"}]},
        actor=admin,
    )
    rules.rule_set_change(
        queue_name="payments",
        rules=[
            RuleSpec(
                "big-payments",
                "payment.*",
                when="payload.amount_cents > 50000",
                decision="require_approval",
                note="over 500.00",
            ),
            RuleSpec("no-prod-wipes", "db.wipe", "prod-*", decision="deny"),
        ],
        default="allow",
        actor=admin,
    )
    rules.rule_set_change(
        queue_name="deploys",
        rules=[
            RuleSpec(
                "forced", "deploy.*", when="has(payload.force) && payload.force", decision="deny"
            ),
            RuleSpec("prod", "deploy.*", "prod-*", decision="require_approval"),
        ],
        default="allow",
        actor=admin,
    )
    people.person_update(
        username="abe", roles=["approver", "operator"], break_glass=True, actor=admin
    )
    return admin


EXPLAIN = """
import json
from leaseboard.core.services.policy import policy_explain
out = []
for queue, kind, target, payload in json.loads(input()):
    e = policy_explain(queue_name=queue, kind=kind, target=target, payload=payload)
    out.append([e.ruling.decision, e.ruling.rule])
print("DECISIONS=" + json.dumps(out))
"""


def test_export_then_apply_on_a_fresh_database_decides_the_same(configured, tmp_path):
    expected = decisions()
    assert ("require_approval", "big-payments") in expected  # the proposals cover the rules
    text = config_dumps(config_export())
    path = tmp_path / "leaseboard.toml"
    path.write_text(text)
    assert "s" not in config_loads(text)["queues"]["payments"]["notify"]["webhooks"][0]

    db = tmp_path / "fresh.sqlite3"
    assert manage_on_sqlite(db, "migrate", "--noinput", "-v", "0").returncode == 0
    for user, role in (("ada", "admin"), ("abe", "approver")):
        made = manage_on_sqlite(
            db, "create_user", user, "--role", role, "--password", "x-Long-enough-1"
        )
        assert made.returncode == 0, made.stderr
    before = manage_on_sqlite(db, "config", "export").stdout
    dry = manage_on_sqlite(db, "config", "apply", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+ queue payments" in dry.stdout and "dry run" in dry.stdout
    assert manage_on_sqlite(db, "config", "export").stdout == before  # the dry run changed nothing

    applied = manage_on_sqlite(db, "config", "apply", str(path))
    assert applied.returncode == 0, applied.stderr
    assert "applied" in applied.stdout
    again = manage_on_sqlite(db, "config", "apply", str(path))
    assert again.stdout.strip().startswith("no changes"), again.stdout

    run = manage_on_sqlite(db, "shell", "-c", EXPLAIN, stdin=json.dumps(PROPOSALS) + "\n")
    assert run.returncode == 0, run.stderr
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("DECISIONS="))
    assert [tuple(d) for d in json.loads(line.removeprefix("DECISIONS="))] == expected
    # And the fresh database exports the same document back.
    assert manage_on_sqlite(db, "config", "export").stdout == text


SSO_ONLY = """
version = 1

[sso]
groups_claim = "roles"
local_passwords = false

[sso.groups]
payments-oncall = ["operator:payments", "operator:refunds"]
sre = ["operator", "approver:deploys", "break_glass"]
"""


def test_group_mappings_apply_on_a_fresh_database_with_no_people(tmp_path):
    """Promoting a file needs no people to exist: they arrive with their groups."""
    path = tmp_path / "sso.toml"
    path.write_text(SSO_ONLY)
    db = tmp_path / "fresh.sqlite3"
    assert manage_on_sqlite(db, "migrate", "--noinput", "-v", "0").returncode == 0
    applied = manage_on_sqlite(db, "config", "apply", str(path))
    assert applied.returncode == 0, applied.stderr
    exported = config_loads(manage_on_sqlite(db, "config", "export").stdout)
    assert exported["sso"] == {
        "groups_claim": "roles",
        "local_passwords": False,
        "groups": {
            "payments-oncall": ["operator:payments", "operator:refunds"],
            "sre": ["approver:deploys", "operator", "break_glass"],
        },
    }
    assert exported["people"] == {}
    again = manage_on_sqlite(db, "config", "apply", str(path))
    assert again.stdout.strip().startswith("no changes"), again.stdout


def test_a_bad_group_mapping_is_refused_under_its_path(configured):
    doc = config_export()
    doc["sso"] = {"groups": {"ops": ["admin:payments"], "x": "operator"}}
    with pytest.raises(SettingsInvalid) as exc:
        config_apply(doc, actor=configured)
    assert "held for every queue" in exc.value.errors["sso.groups.ops"]
    assert "a list of roles" in exc.value.errors["sso.groups.x"]


def test_a_dry_run_changes_nothing_and_a_second_apply_records_nothing(configured):
    doc = config_export()
    doc["queues"]["payments"]["capacity"] = 5
    doc["queues"]["payments"]["rules"][0]["when"] = "payload.amount_cents > 90000"
    audit = AuditEntry.objects.count()
    plan = config_apply(doc, actor=configured, dry_run=True).plan
    assert {c.what for c in plan.changes} == {"queue payments", "rules of payments"}
    assert "capacity: 2 -> 5" in plan.text()
    assert Queue.objects.get(name="payments").capacity == 2
    assert AuditEntry.objects.count() == audit
    config_apply(doc, actor=configured)
    assert Queue.objects.get(name="payments").capacity == 5
    actions = list(
        AuditEntry.objects.filter(seq__gt=audit).order_by("seq").values_list("action", flat=True)
    )
    assert actions == ["queue.update", "policy.rules_change", "config.apply"]
    after = AuditEntry.objects.count()
    assert not config_apply(doc, actor=configured).plan.changes
    assert AuditEntry.objects.count() == after


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (
            lambda d: d["queues"]["payments"]["rules"][0].update(when="payload.x >"),
            "queues.payments.rules[0].when",
        ),
        (
            lambda d: d["queues"]["payments"]["rules"][0].update(colour="red"),
            "queues.payments.rules[0].colour",
        ),
        (lambda d: d["queues"]["payments"].update(colour="red"), "queues.payments.colour"),
        (
            lambda d: d["queues"]["payments"]["rules"].append(
                {"name": "late", "kind": "db.wipe", "target": "prod-eu", "decision": "allow"}
            ),
            "queues.payments.rules[2].kind",
        ),
        (
            lambda d: d["queues"]["payments"].update(
                timing={"ttl_ms": 3000, "renew_after_ms": 2000}
            ),
            "queues.payments.timing.ttl_ms",
        ),
        (
            lambda d: d["queues"]["deploys"]["envelope"]["windows"].update(tz="Mars/Base"),
            "queues.deploys.envelope.windows.tz",
        ),
        (lambda d: d["people"].update(nobody=["admin"]), "people.nobody"),
        (lambda d: d["people"].update(abe=["approver", "wizard"]), "people.abe"),
        (lambda d: d.update(extras=1), "extras"),
    ],
)
def test_a_bad_file_is_refused_whole_with_each_problem_under_its_path(configured, edit, path):
    doc = config_export()
    doc["queues"]["payments"]["capacity"] = 9  # a good change beside the bad one
    edit(doc)
    audit = AuditEntry.objects.count()
    with pytest.raises(SettingsInvalid) as caught:
        config_apply(doc, actor=configured)
    assert path in caught.value.errors, caught.value.errors
    assert Queue.objects.get(name="payments").capacity == 2
    assert AuditEntry.objects.count() == audit
    assert EffectRule.objects.filter(queue__name="payments").count() == 2


def test_four_eyes_turns_a_rule_change_from_a_file_into_a_proposal(configured, settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    doc = config_export()
    doc["queues"]["payments"]["default_decision"] = "deny"
    applied = config_apply_text(config_dumps(doc), actor=configured)
    assert len(applied.proposals) == 1
    assert Queue.objects.get(name="payments").default_decision == "allow"


def test_approver_notices_export_without_secrets_and_apply_back_unchanged(configured):
    queue = Queue.objects.get(name="payments")
    queue.notify = queues.notify_checked(
        {
            "approvals": {
                "approvers": ["abe", "group:finance"],
                "webhooks": [{"url": "https://hooks.example.com/a", "secret": "s3cret-a"}],
                "rules": {
                    "big-payments": {
                        "webhooks": [{"url": "https://hooks.example.com/b", "secret": "s3cret-b"}]
                    }
                },
            }
        },
        current={},
    )
    queue.save(update_fields=["notify"])
    text = config_dumps(config_export())
    assert "s3cret" not in text and "https://hooks.example.com/b" in text
    assert not config_apply(config_loads(text), actor=configured).plan.changes
    kept = Queue.objects.get(name="payments").notify["approvals"]
    assert kept["rules"]["big-payments"]["webhooks"][0]["secret"] == "s3cret-b"
    with pytest.raises(SettingsInvalid, match="approvals.nobody"):
        queues.notify_checked({"approvals": {"nobody": ["x"]}}, current={})
