"""Separation of duties (docs/design.md §9, "no route around a rule"): one admin cannot defeat
four-eyes. The reproductions, through the People and changes pages an admin uses:
(a) giving oneself approver, operator and break-glass, then approving a payment;
(b) with four-eyes on, creating an admin and being shown its password;
(c) resetting another admin's password and being shown it;
and `config apply` from a shell whose LEASEBOARD_POLICY_FOUR_EYES says false while the
servers run with four-eyes. Four-eyes is a setting in the database, changed under itself."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from leaseboard.core.authority import user_roles
from leaseboard.core.models import AuditEntry
from leaseboard.policy.models import FourEyes, PolicyChange
from tests.builders import PASSWORD, make_user
from tests.processes import manage_on_sqlite

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]
User = get_user_model()


def signed_in(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def post(client: Client, path: str, data: dict):  # type: ignore[no-untyped-def]
    return client.post(path, data, follow=True)


def messages_of(response) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(str(m) for m in response.context["messages"]) if response.context else ""


@pytest.fixture
def ad1():  # type: ignore[no-untyped-def]
    return make_user("ad1", "admin")


@pytest.fixture
def ad2():  # type: ignore[no-untyped-def]
    return make_user("ad2", "admin")


@pytest.fixture
def four_eyes(ad1, ad2):  # type: ignore[no-untyped-def]
    """Four-eyes on, as the settings page turns it on (two admins exist to decide)."""
    post(signed_in(ad1), "/settings/four-eyes", {"on": "on"})
    assert FourEyes.objects.get(id=1).on


def test_an_admin_cannot_give_themselves_roles_or_break_glass(ad1):
    """(a) The admin ticks approver, operator and break glass on their own People row."""
    response = post(
        signed_in(ad1),
        "/settings/people/ad1/",
        {"roles": ["admin", "approver", "operator"], "break_glass": "on", "active": "on"},
    )
    assert response.status_code == 403  # the table's refusal: the 403 page
    ad1.refresh_from_db()
    assert {r.value for r in user_roles(ad1)} == {"admin"}
    assert not ad1.has_perm("takeovers.break_glass")
    assert not AuditEntry.objects.filter(action="user.update").exists()
    # ... so they cannot approve a payment either (the approvals page is an approver's).
    assert signed_in(ad1).get("/takeovers/pending/").status_code == 403


def test_an_admin_cannot_reset_their_own_password_from_the_people_page(ad1):
    response = post(signed_in(ad1), "/settings/people/ad1/password", {})
    assert response.status_code == 403
    ad1.refresh_from_db()
    assert ad1.check_password(PASSWORD)


def test_with_four_eyes_a_new_admin_waits_for_a_second_admin_and_no_password_is_shown(
    ad1, ad2, four_eyes
):
    """(b) ad1 creates `ad1-shadow` as an admin: it is a proposal, nobody is made, nothing
    secret is shown, and ad1 cannot approve it; ad2 approves and is shown a one-time link."""
    page = post(signed_in(ad1), "/settings/people/", {"username": "ad1-shadow", "roles": "admin"})
    body = page.content.decode()
    assert 'id="secret-once"' not in body
    assert "waits for a second admin" in messages_of(page)
    assert not User.objects.filter(username="ad1-shadow").exists()
    change = PolicyChange.objects.get(kind="person_create", status="pending")
    assert change.payload["roles"] == ["admin"] and "password" not in change.payload

    refused = post(signed_in(ad1), f"/settings/changes/{change.pk}/approve", {"note": "me"})
    assert refused.status_code == 403
    assert not User.objects.filter(username="ad1-shadow").exists()

    approved = signed_in(ad2).post(f"/settings/changes/{change.pk}/approve", {"note": "ok"})
    link = re.search(r'id="secret-once">([^<]+)<', approved.content.decode()).group(1)
    shadow = User.objects.get(username="ad1-shadow")
    assert "/account/set-password/" in link and not shadow.has_usable_password()
    # Its owner (whoever the link is handed to) chooses the password, once.
    path = link.split("127.0.0.1:8000", 1)[-1]
    owner = Client()
    form = owner.get(path, follow=True)
    assert b"Choose your password" in form.content and form.context["validlink"]
    done = owner.post(
        form.request["PATH_INFO"],
        {"new_password1": "Shadow-Pass-9x!", "new_password2": "Shadow-Pass-9x!"},
        follow=True,
    )
    assert b"Password set" in done.content
    assert User.objects.get(username="ad1-shadow").check_password("Shadow-Pass-9x!")
    assert not Client().get(path, follow=True).context["validlink"]  # spent
    entry = AuditEntry.objects.get(action="user.password_set")
    assert entry.actor_name == "ad1-shadow" and "Shadow" not in str(entry.after)


def test_with_four_eyes_resetting_another_admins_password_waits_and_shows_nothing(
    ad1, ad2, four_eyes
):
    """(c) ad1 resets ad2's password: a proposal ad2 (the person it is about) cannot
    approve, ad2's password keeps working, and nobody is shown a password."""
    page = post(signed_in(ad1), "/settings/people/ad2/password", {})
    assert 'id="secret-once"' not in page.content.decode()
    ad2.refresh_from_db()
    assert ad2.check_password(PASSWORD)
    change = PolicyChange.objects.get(kind="password_reset", status="pending")
    assert change.subject_id == ad2.pk
    about_me = post(signed_in(ad2), f"/settings/changes/{change.pk}/approve", {})
    assert about_me.status_code == 403
    ad2.refresh_from_db()
    assert ad2.check_password(PASSWORD)


def test_without_four_eyes_a_reset_shows_a_one_time_link_never_a_password(ad1, ad2):
    page = post(signed_in(ad1), "/settings/people/ad2/password", {})
    shown = re.search(r'id="secret-once">([^<]+)<', page.content.decode()).group(1)
    assert "/account/set-password/" in shown
    ad2.refresh_from_db()
    assert not ad2.has_usable_password()  # the old password stopped working
    signing_in = Client().post("/login/", {"username": "ad2", "password": PASSWORD})
    assert "_auth_user_id" not in signing_in.client.session


def test_with_four_eyes_a_grant_waits_and_what_takes_power_away_applies_at_once(
    ad1, ad2, four_eyes
):
    make_user("olga", "operator", "manager")
    post(
        signed_in(ad1),
        "/settings/people/olga/",
        {"roles": ["operator", "approver"], "break_glass": "on", "active": "on"},
    )
    olga = User.objects.get(username="olga")
    # manager removed now; approver and break-glass proposed.
    assert {r.value for r in user_roles(olga)} == {"operator"}
    assert not olga.has_perm("takeovers.break_glass")
    change = PolicyChange.objects.get(kind="person", status="pending")
    assert change.payload == {"add_roles": ["approver"], "break_glass": True, "active": False}
    signed_in(ad2).post(f"/settings/changes/{change.pk}/approve", {})
    olga = User.objects.get(username="olga")
    assert {r.value for r in user_roles(olga)} == {"operator", "approver"}
    assert olga.has_perm("takeovers.break_glass")


def test_with_four_eyes_two_admins_must_remain(ad1, ad2, four_eyes):
    response = post(
        signed_in(ad1), "/settings/people/ad2/", {"roles": ["operator"], "active": "on"}
    )
    assert "two active admins must remain" in messages_of(response)
    assert {r.value for r in user_roles(User.objects.get(username="ad2"))} == {"admin"}


def test_four_eyes_is_turned_off_only_by_a_second_admin(ad1, ad2, four_eyes):
    post(signed_in(ad1), "/settings/four-eyes", {"on": "off", "note": "quiet week"})
    assert FourEyes.objects.get(id=1).on
    change = PolicyChange.objects.get(kind="four_eyes", status="pending")
    post(signed_in(ad1), f"/settings/changes/{change.pk}/approve", {})
    assert FourEyes.objects.get(id=1).on  # not by the one who asked
    signed_in(ad2).post(f"/settings/changes/{change.pk}/approve", {})
    assert not FourEyes.objects.get(id=1).on
    actions = list(
        AuditEntry.objects.filter(action__startswith="four_eyes.")
        .order_by("seq")
        .values_list("action", flat=True)
    )
    assert actions == ["four_eyes.on", "four_eyes.change_proposed", "four_eyes.off"]


def test_four_eyes_needs_a_second_admin_to_be_turned_on(ad1):
    response = post(signed_in(ad1), "/settings/four-eyes", {"on": "on"})
    assert "two active admins" in messages_of(response)
    assert not FourEyes.objects.filter(id=1, on=True).exists()


def test_the_commands_obey_four_eyes_as_the_database_has_it(ad1, ad2, four_eyes, settings):
    """The shell's own LEASEBOARD_POLICY_FOUR_EYES=false changes nothing: the setting is the
    database's. Granting a role and creating a person from the shell are proposals too."""
    settings.LEASEBOARD_POLICY_FOUR_EYES = False
    make_user("abe", "operator")
    call_command("user_role", "abe", "--add", "approver")
    assert {r.value for r in user_roles(User.objects.get(username="abe"))} == {"operator"}
    call_command("create_user", "newbie", "--role", "operator")
    assert not User.objects.filter(username="newbie").exists()
    kinds = set(PolicyChange.objects.filter(status="pending").values_list("kind", flat=True))
    assert kinds == {"person", "person_create"}
    assert PolicyChange.objects.get(kind="person").requested_by_name.startswith("cli:")


def _manage(db: Path, *args: str, four_eyes_env: str = "") -> subprocess.CompletedProcess:
    return manage_on_sqlite(db, *args, LEASEBOARD_POLICY_FOUR_EYES=four_eyes_env)


TURN_ON = (
    "from leaseboard.policy.services.common import cli_actor\n"
    "from leaseboard.policy.services.four_eyes import four_eyes_set\n"
    "four_eyes_set(on=True, actor=cli_actor('cli:ops'))\n"
)
# deliberate: a policy file's text (data, alike in shape only).
RULES = """
[queues.default]
default_decision = "allow"

[[queues.default.rules]]
name = "everything-goes"
kind = "*"
decision = "allow"
"""


@pytest.mark.slow
def test_config_apply_with_four_eyes_false_in_its_environment_still_proposes(tmp_path):
    """The reproduction: `LEASEBOARD_POLICY_FOUR_EYES=false manage.py config apply` applied
    rules directly while the servers ran with four-eyes. A real process, its own database."""
    db = tmp_path / "four-eyes.sqlite3"
    assert _manage(db, "migrate", "--noinput", "-v", "0").returncode == 0
    for user in ("ad1", "ad2"):
        made = _manage(db, "create_user", user, "--role", "admin")
        assert made.returncode == 0, made.stderr
    on = _manage(db, "shell", "-c", TURN_ON)
    assert on.returncode == 0, on.stderr
    path = tmp_path / "rules.toml"
    path.write_text(RULES)
    applied = _manage(db, "config", "apply", str(path), four_eyes_env="false")
    assert applied.returncode == 0, applied.stderr
    assert "waits for a second admin" in applied.stdout
    exported = _manage(db, "config", "export")
    assert "everything-goes" not in exported.stdout and "four_eyes = true" in exported.stdout
