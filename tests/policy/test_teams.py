"""Teams: a role held for every queue or for named queues (docs/design.md §9), set on the
People page and in config as code (`operator:payments`), deciding every human act in the
work item's queue; the live page shows everything and marks what the person may act on,
or hides other teams' work where LEASEBOARD_HIDE_OTHER_QUEUES says so. The matrix of
every act x scope is tests/core/test_authority_matrix.py's team column."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.test import Client

from leaseboard.core.authority import Actor
from leaseboard.core.models import AuditEntry, Lease, Queue, RoleScope
from leaseboard.core.services.leases import lease_revoke
from leaseboard.domain.errors import Forbidden
from leaseboard.policy.models import PolicyChange
from leaseboard.policy.services import changes, people
from leaseboard.policy.services.common import SettingsInvalid, cli_actor
from leaseboard.policy.services.config import config_apply, config_export
from tests.builders import leased_item, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


def _queues(*names: str) -> None:
    for name in names:
        Queue.objects.get_or_create(name=name)


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def ada(db):  # type: ignore[no-untyped-def]
    return make_user("ada", "admin")


def test_an_admin_scopes_a_role_on_the_people_page_and_it_is_audited(ada):
    pam = make_user("pam", "operator")
    response = _client(ada).post(
        "/settings/people/pam/",
        {"roles": ["operator", "approver"], "scopes": "operator:payments, approver:refunds"},
    )
    assert response.status_code == 302
    scopes = dict(RoleScope.objects.filter(user=pam).values_list("role", "queues"))
    assert scopes == {"operator": ["payments"], "approver": ["refunds"]}
    entry = AuditEntry.objects.filter(action="user.update").latest("seq")
    assert entry.after["scopes"] == {"approver": ["refunds"], "operator": ["payments"]}
    page = _client(ada).get("/settings/people/").content.decode()
    assert 'value="approver:refunds operator:payments"' in page
    # Blank: every queue again.
    _client(ada).post("/settings/people/pam/", {"roles": ["operator"], "scopes": ""})
    assert not RoleScope.objects.filter(user=pam).exists()


@pytest.mark.parametrize(
    ("scopes", "message"),
    [
        ({"admin": ["payments"]}, "held for every queue"),
        ({"manager": ["payments"]}, "scoped to queues but not held"),
        ({"operator": []}, "at least one"),
        ({"operator": ["no spaces"]}, "slugs"),
    ],
)
def test_a_bad_scope_is_refused_and_nothing_is_written(ada, scopes, message):
    make_user("pam", "operator")
    make_user("second", "admin")
    with pytest.raises(SettingsInvalid, match=message):
        people.person_update(
            username="pam",
            roles=["operator", "admin"],
            scopes=scopes,
            break_glass=False,
            actor=Actor.human(ada),
        )
    assert not RoleScope.objects.exists()


def test_the_database_refuses_an_admin_held_for_some_queues(ada):
    with pytest.raises(IntegrityError), transaction.atomic():
        RoleScope.objects.create(user=ada, role="admin", queues=["payments"])


def test_under_four_eyes_a_wider_scope_waits_and_a_narrower_one_applies_at_once(ada, settings):
    settings.LEASEBOARD_POLICY_FOUR_EYES = True
    bea = make_user("bea", "admin")
    pam = make_user("pam", "operator")
    actor = Actor.human(ada)

    def pam_operator_in(queues: list[str]):  # type: ignore[no-untyped-def]
        return people.person_update(
            username="pam",
            roles=["operator"],
            scopes={"operator": queues},
            break_glass=False,
            actor=actor,
        )

    narrowed = pam_operator_in(["payments", "refunds"])
    assert narrowed.proposal is None  # every queue -> two queues: power taken away, now
    assert RoleScope.objects.get(user=pam).queues == ["payments", "refunds"]
    narrowed = pam_operator_in(["payments"])
    assert narrowed.proposal is None and RoleScope.objects.get(user=pam).queues == ["payments"]
    widened = pam_operator_in(["payments", "deploys"])
    assert widened.proposal is not None and "+operator:deploys,payments" in widened.proposal.summary
    assert RoleScope.objects.get(user=pam).queues == ["payments"]  # until a second admin
    with pytest.raises(Forbidden):
        changes.change_approve(change_id=widened.proposal.pk, actor=actor)
    changes.change_approve(change_id=widened.proposal.pk, actor=Actor.human(bea), note="ok")
    assert RoleScope.objects.get(user=pam).queues == ["deploys", "payments"]
    everywhere = people.person_update(
        username="pam", roles=["operator"], scopes={}, break_glass=False, actor=actor
    )
    assert everywhere.proposal is not None  # every queue is wider than two
    changes.change_approve(change_id=everywhere.proposal.pk, actor=Actor.human(bea), note="ok")
    assert not RoleScope.objects.filter(user=pam).exists()
    assert PolicyChange.objects.filter(status="applied").count() == 2


def test_config_as_code_round_trips_scoped_roles(ada):
    _queues("payments", "deploys")
    make_user("pam", "operator", "manager")
    doc = config_export()
    doc["people"]["pam"] = ["operator:payments", "operator:deploys", "manager", "break_glass"]
    applied = config_apply(doc, actor=Actor.human(ada))
    assert [c.what for c in applied.plan.changes] == ["person pam"]
    pam_scope = RoleScope.objects.get(user__username="pam")
    assert (pam_scope.role, pam_scope.queues) == ("operator", ["deploys", "payments"])
    exported = config_export()["people"]["pam"]
    assert exported == ["manager", "operator:deploys", "operator:payments", "break_glass"]
    again = config_apply(config_export(), actor=Actor.human(ada))
    assert again.plan.changes == []  # the export applies back unchanged


def test_config_as_code_refuses_an_unknown_role_under_its_path(ada):
    make_user("pam", "operator")
    doc = config_export()
    doc["people"]["pam"] = ["superhero:payments"]
    with pytest.raises(SettingsInvalid) as exc:
        config_apply(doc, actor=Actor.human(ada))
    assert "people.pam" in exc.value.errors and "not a role" in exc.value.errors["people.pam"]


def _team_world(agent):  # type: ignore[no-untyped-def]
    _queues("payments", "deploys")
    executor, _ = agent()
    pay = leased_item(executor, key="pay-1", queue="payments")
    dep = leased_item(executor, key="dep-1", queue="deploys")
    olga = make_user("olga", "operator")
    RoleScope.objects.create(user=olga, role="operator", queues=["payments"])
    return olga, pay, dep


def test_an_operator_of_payments_revokes_in_payments_and_not_in_deploys(agent):
    olga, pay, dep = _team_world(agent)
    actor = Actor.human(olga)
    with pytest.raises(Forbidden):
        lease_revoke(lease_id=dep.id, actor=actor, reason_category="other", reason_text="no")
    assert Lease.objects.get(id=dep.id).state == "active"
    lease_revoke(lease_id=pay.id, actor=actor, reason_category="other", reason_text="mine")
    assert Lease.objects.get(id=pay.id).state == "revoked"


def test_the_live_page_shows_every_queue_and_marks_what_the_person_may_act_on(agent, settings):
    olga, pay, dep = _team_world(agent)
    html = _client(olga).get("/").content.decode()
    rows = {lease.work_item.key: _row_html(html, lease) for lease in (pay, dep)}
    assert 'class="pick"' in rows["pay-1"] and "Request takeover" in rows["pay-1"]
    assert "data-view-only" not in rows["pay-1"]
    assert 'class="pick"' not in rows["dep-1"] and "Request takeover" not in rows["dep-1"]
    assert "data-view-only" in rows["dep-1"]
    # The work item page offers its acts only in the person's queues.
    assert 'id="revoke-form"' in _client(olga).get("/work/pay-1").content.decode()
    assert 'id="revoke-form"' not in _client(olga).get("/work/dep-1").content.decode()
    settings.LEASEBOARD_HIDE_OTHER_QUEUES = True
    hidden = _client(olga).get("/").content.decode()
    assert f'id="lease-{pay.id}"' in hidden and f'id="lease-{dep.id}"' not in hidden
    # Someone with a role for every queue still sees everything.
    abe = make_user("abe", "approver")
    assert f'id="lease-{dep.id}"' in _client(abe).get("/").content.decode()


def _row_html(html: str, lease: Lease) -> str:
    start = html.index(f'<tr id="lease-{lease.id}"')
    return html[start : html.index("</tr>", start)]


def test_the_last_admin_guard_holds_on_the_config_path_too(ada):
    doc = config_export()
    doc["people"]["ada"] = ["operator"]
    with pytest.raises((SettingsInvalid, Forbidden)):
        config_apply(doc, actor=cli_actor("shell"))
    assert ada.groups.filter(name="admin").exists()
