"""The operators' pages through Django's test client (issue 13): alert groups, group
acknowledge and snooze; the live list's order, ended rows, totals and keyset pages for every
sort; the approver's inbox and badge; standing that warns and keeps lapsed items; ISO 8601
CSV; the audit log's filters and names; break-glass out of the medians; refusal pages in the
layout. Fixed query counts per page; roles and CSRF on every new write."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaseboard.core.authority import Actor
from leaseboard.core.models import Alert, AlertSnooze, AuditEntry
from leaseboard.core.services.leases import lease_release, lease_renew
from leaseboard.sweeps.services import sweep_run
from leaseboard.takeovers import services
from tests.builders import age_lease, grant_break_glass, leased_item, make_user, request_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]
HX = {"HTTP_HX_REQUEST": "true"}


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    c = Client()
    c.force_login(user)
    return c


def _count(client: Client, url: str, **headers: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **headers)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


def _jeopardy(executor, key: str):  # type: ignore[no-untyped-def]
    lease = leased_item(executor, key=key)
    age_lease(lease.id, lease.jeopardy_after_ms + 100)
    return lease


# -- alerts ---------------------------------------------------------------------------------


def test_alerts_are_grouped_by_agent_and_kind_and_a_group_is_acknowledged_up_to_what_was_seen(
    operator_client, operator, agent
):
    a, _ = agent("loopy")
    b, _ = agent("steady")
    for i in range(3):
        _jeopardy(a, f"a-{i}")
    _jeopardy(b, "b-0")
    sweep_run()
    html = operator_client.get("/alerts/").content.decode()
    assert re.search(rf'id="group-{a.id}-jeopardy".*?<b>3</b>', html, re.S)
    assert f'id="group-{b.id}-jeopardy"' in html
    upto = int(re.search(r'name="upto" value="(\d+)"', html).group(1))
    _jeopardy(a, "a-3")  # arrives after the page was read
    sweep_run()

    response = operator_client.post(
        "/alerts/acknowledge",
        {"group": [f"{a.id}:jeopardy"], "upto": upto, "note": "restarting loopy"},
    )
    assert response.status_code == 302
    acked = Alert.objects.filter(lease__holder=a, acknowledged_at_ms__isnull=False)
    assert acked.count() == 3  # not the one that arrived unseen
    assert set(acked.values_list("acknowledge_note", flat=True)) == {"restarting loopy"}
    entry = AuditEntry.objects.get(action="alert.acknowledge_group")
    assert (entry.object_id, entry.reason, entry.after["acknowledged"]) == (
        f"{a.id}:jeopardy",
        "restarting loopy",
        3,
    )
    # The default view shows what needs attention: loopy's newest alert, and steady's.
    html = operator_client.get(
        f"/alerts/?agent=loopy&since={upto}", **HX | {"HTTP_HX_TARGET": "alert-groups"}
    ).content.decode()
    assert re.search(r'data-announce="\{n\} new alerts" data-count="1"', html)


def test_a_snoozed_group_leaves_the_badge_and_the_default_view_until_it_ends(
    operator_client, operator, agent, db_clock
):
    a, _ = agent("noisy")
    _jeopardy(a, "n-0")
    sweep_run()
    assert ">1</span>" in operator_client.get("/alerts/badge").content.decode()
    response = operator_client.post(
        "/alerts/snooze", {"group": [f"{a.id}:jeopardy"], "minutes": 15, "note": "known"}
    )
    assert response.status_code == 302 and AlertSnooze.objects.count() == 1
    assert ">0</span>" in operator_client.get("/alerts/badge").content.decode()
    assert f"group-{a.id}-jeopardy" not in operator_client.get("/alerts/").content.decode()
    snoozed = operator_client.get("/alerts/?state=snoozed").content.decode()
    assert f"group-{a.id}-jeopardy" in snoozed and "snoozed until" in snoozed
    db_clock.advance(16 * 60_000)
    assert ">1</span>" in operator_client.get("/alerts/badge").content.decode()


@pytest.mark.parametrize("path", ["/alerts/acknowledge", "/alerts/snooze"])
@pytest.mark.parametrize("role", ["approver", "manager"])
def test_only_operators_acknowledge_or_snooze_groups(agent, path, role):
    a, _ = agent()
    _jeopardy(a, "r-0")
    sweep_run()
    client = _client(make_user(f"u-{role}", role))
    form = {"group": [f"{a.id}:jeopardy"], "upto": 10**9, "minutes": 15, "note": "x"}
    assert client.post(path, form).status_code == 403
    assert not Alert.objects.filter(acknowledged_at_ms__isnull=False).exists()
    assert not AlertSnooze.objects.exists()


def test_group_writes_need_the_csrf_token(operator, agent):
    a, _ = agent()
    _jeopardy(a, "c-0")
    sweep_run()
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    form = {"group": [f"{a.id}:jeopardy"], "upto": 10**9, "minutes": 15, "note": "x"}
    assert client.post("/alerts/acknowledge", form).status_code == 403
    assert client.post("/alerts/snooze", form).status_code == 403
    assert not AuditEntry.objects.filter(action__startswith="alert.").exists()


def test_the_grouped_alerts_page_costs_the_same_with_ten_alerts_or_one(operator_client, agent):
    a, _ = agent()
    _jeopardy(a, "q-0")
    sweep_run()
    one = _count(operator_client, "/alerts/")
    for i in range(1, 10):
        _jeopardy(a, f"q-{i}")
    sweep_run()
    assert _count(operator_client, "/alerts/") == one
    fragment = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "alert-groups"}
    assert _count(operator_client, "/alerts/", **fragment) == one - 1  # no header badge


# -- live leases ------------------------------------------------------------------------------


ROW_ID = r'<tr id="lease-([0-9a-f-]{36})"'


def _sections(html: str) -> tuple[list[str], list[str]]:
    """The lease ids of the live list, and of the section of leases that just ended."""
    live, _, ended = html.partition('id="ended-leases"')
    return re.findall(ROW_ID, live), re.findall(ROW_ID, ended)


def _ids(client: Client, url: str) -> list[str]:
    html = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live").content.decode()
    return _sections(html)[0]


@pytest.mark.parametrize(
    "sort", ["urgency", "-urgency", "key", "-key", "holder", "-holder", "due", "-due"]
)
def test_keyset_pages_visit_every_lease_once_in_every_sort(operator_client, agent, sort):
    a, _ = agent("aa")
    b, _ = agent("bb")
    leases = [leased_item(a if i % 2 else b, key=f"s-{i:02d}") for i in range(13)]
    age_lease(leases[7].id, leases[7].jeopardy_after_ms + 100)  # urgent: in jeopardy
    lease_release(lease_id=leases[4].id, executor=b, epoch=1)  # ended a moment ago: below
    seen: list[str] = []
    ended: list[str] = []
    url = f"/?size=5&sort={sort}"
    while url:
        response = operator_client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="live")
        html = response.content.decode()
        live, just_ended = _sections(html)
        seen += live
        ended += just_ended
        nxt = re.search(r'id="live-next" href="(/\?[^"]+)"', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else ""
    assert sorted(seen) == sorted(str(x.id) for i, x in enumerate(leases) if i != 4)
    assert ended == [str(leases[4].id)]  # once, on the first page
    by_id = {str(x.id): x.work_item.key for x in leases}
    if sort == "key":
        assert [by_id[i] for i in seen] == [f"s-{i:02d}" for i in range(13) if i != 4]
    if sort == "urgency":
        rest = [f"s-{i:02d}" for i in range(13) if i not in (4, 7)]
        assert [by_id[i] for i in seen] == ["s-07", *rest]


def test_the_live_list_keeps_its_order_as_leases_renew_and_shows_ended_ones_greyed(
    operator_client, agent, settings
):
    a, _ = agent()
    leases = [leased_item(a, key=f"o-{i}") for i in range(4)]
    first = _ids(operator_client, "/")
    for lease in reversed(leases):
        lease_renew(lease_id=lease.id, executor=a, epoch=1)
    assert _ids(operator_client, "/") == first  # by work key, whatever time is left
    lease_release(lease_id=leases[2].id, executor=a, epoch=1)
    html = operator_client.get("/").content.decode()
    row = re.search(rf'<tr id="lease-{leases[2].id}"[^>]*>', html).group(0)
    assert 'class="ended"' in row and "released by holder" in html
    assert _sections(html)[1] == [str(leases[2].id)]  # in the section below the live ones
    assert "Rows 1–3 of 3" in html and "1 lease ended in the last moments" in html
    settings.LEASEBOARD_DASHBOARD_ENDED_VISIBLE_MS = 0
    html = operator_client.get("/").content.decode()
    assert str(leases[2].id) not in html


# -- the approver's inbox ------------------------------------------------------------------------


def test_the_inbox_and_the_pending_badge_cost_the_same_whatever_is_waiting(people, agent):
    ap = _client(people.approver)
    for i in range(4):
        executor, _ = agent()
        leased_item(executor, key=f"p-{i}")
        request_for(f"p-{i}", people.operator)
        if i == 0:
            one = _count(ap, "/takeovers/pending/")
    assert _count(ap, "/takeovers/pending/") == one
    html = ap.get("/alerts/").content.decode()  # any page: the badge is in the header
    assert re.search(r'id="pending-badge"[^>]*><span aria-hidden="true">4</span>', html)
    assert "pending-badge" not in _client(people.operator).get("/alerts/").content.decode()


def test_the_inbox_fragment_answers_304_while_nothing_changed(people, scene):
    ap = _client(people.approver)
    fragment = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "inbox"}
    first = ap.get("/takeovers/pending/", **fragment)
    version = first["X-Leaseboard-Version"]
    assert (
        ap.get("/takeovers/pending/", HTTP_X_LEASEBOARD_VERSION=version, **fragment).status_code
        == 304
    )
    request_for(scene.key, people.operator)
    changed = ap.get("/takeovers/pending/", HTTP_X_LEASEBOARD_VERSION=version, **fragment)
    assert changed.status_code == 200 and scene.key.encode() in changed.content


def test_bulk_decisions_are_for_approvers_and_never_ones_own(people, agent):
    executor, _ = agent()
    leased_item(executor, key="bd-1")
    req = request_for("bd-1", people.operator)
    op = _client(people.operator)
    assert (
        op.post("/takeovers/decide", {"decision": "approve", "request": [req.id]}).status_code
        == 403
    )
    ap = _client(people.approver)
    response = ap.post("/takeovers/decide", {"decision": "reject", "request": [req.id]})
    assert response.status_code == 302
    req.refresh_from_db()
    assert req.status == "pending"  # a rejection needs a note
    ap.post("/takeovers/decide", {"decision": "reject", "request": [req.id], "note": "no"})
    req.refresh_from_db()
    assert req.status == "rejected"


# -- standing, CSV, managers -------------------------------------------------------------------


def test_standing_warns_at_a_fifth_left_and_keeps_a_lapsed_item(people, scene):
    from django.db import transaction

    from leaseboard.core.clock import db_now_ms
    from leaseboard.core.models import Lease
    from leaseboard.core.services.leases import lease_expire_if_due_locked

    grant_break_glass(people.operator)
    iv = services.takeover_break_glass(
        work_key=scene.key,
        actor=Actor.human(people.operator),
        reason_category="stuck",
        reason_text="x",
        standing_ms=10 * 60_000,
    )
    op = _client(people.operator)
    assert f'id="warn-{iv.id}"' not in op.get("/takeovers/standing/").content.decode()
    age_lease(iv.lease_id, 8 * 60_000 + 1000)
    assert f'id="warn-{iv.id}"' in op.get("/takeovers/standing/").content.decode()
    age_lease(iv.lease_id, 3 * 60_000)
    with transaction.atomic():
        lease_expire_if_due_locked(
            Lease.objects.select_for_update().get(id=iv.lease_id), db_now_ms()
        )
    services.takeover_requests_expire_due()
    html = op.get("/takeovers/standing/").content.decode()
    assert f'id="retake-{iv.id}"' in html and f"/takeovers/request/{scene.key}" in html


def test_the_csv_export_says_times_in_iso_8601_with_an_offset(people, scene):
    req = request_for(scene.key, people.operator)
    services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    body = b"".join(
        _client(people.manager).get("/takeovers/interventions/export.csv").streaming_content
    )
    (row,) = list(csv.DictReader(io.StringIO(body.decode())))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", row["requested_at"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", row["decided_at"])


def test_break_glass_has_no_approver_and_stays_out_of_the_decision_median(people, agent):
    from leaseboard.takeovers.selectors.records import InterventionFilters
    from leaseboard.takeovers.selectors.summary import summary

    executor, _ = agent()
    leased_item(executor, key="m-1")
    grant_break_glass(people.operator)
    services.takeover_break_glass(
        work_key="m-1",
        actor=Actor.human(people.operator),
        reason_category="incident",
        reason_text="x",
    )
    s = summary(InterventionFilters())
    assert (s.break_glass, s.break_glass_unreviewed, s.median_request_to_decision_ms) == (
        1,
        1,
        None,
    )
    html = _client(people.manager).get("/takeovers/interventions/").content.decode()
    assert "none (break-glass)" in html and "review queue (1)" in html


def test_the_record_names_the_last_agent_even_when_its_lease_had_expired(people, agent):
    executor, _ = agent("gone-bot")
    lease = leased_item(executor, key="g-1")
    age_lease(lease.id, lease.ttl_ms + 1000)
    req = request_for("g-1", people.operator)
    assert req.target_holder is None
    iv = services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    assert iv.agent == executor


def test_the_audit_log_filters_pages_and_names_objects(people, agent):
    for i in range(3):
        agent(f"named-{i}")
    mg = _client(people.manager)
    small = _count(mg, "/audit/")
    html = mg.get("/audit/?action=agent.").content.decode()
    assert "named-0" in html and "executor " not in html
    assert mg.get("/audit/?actor=nobody-at-all").content.decode().count('<tr id="audit-') == 0
    for i in range(3, 60):
        agent(f"named-{i}")
    assert _count(mg, "/audit/") == small
    page1 = mg.get("/audit/?action=agent.").content.decode()
    older = re.search(r'href="(/audit/\?[^"]+)" rel="next"', page1)
    assert older is not None
    page2 = mg.get(older.group(1).replace("&amp;", "&")).content.decode()
    assert set(re.findall(r'id="audit-(\d+)"', page1)).isdisjoint(
        re.findall(r'id="audit-(\d+)"', page2)
    )


# -- refusal pages ----------------------------------------------------------------------------


def test_refusal_and_error_pages_sit_in_the_layout_and_name_the_role(operator_client, rf):
    response = operator_client.get("/audit/")
    html = response.content.decode()
    assert response.status_code == 403
    assert "needs the role manager" in html and 'aria-label="Main"' in html and "<main" in html
    response = operator_client.get("/work/nope")
    assert response.status_code == 404 and 'aria-label="Main"' in response.content.decode()
    from leaseboard.web.errors import server_error

    with CaptureQueriesContext(connection) as ctx:
        page = server_error(rf.get("/"))
    assert page.status_code == 500 and not ctx.captured_queries
    assert b"Something went wrong" in page.content


# -- what a screen reader and a keyboard need (issue 19) ----------------------------------


def test_every_page_has_a_skip_link_named_landmarks_and_no_empty_header(people, scene):
    req = request_for(scene.key, people.operator)
    services.takeover_approve(request_pk=req.id, actor=Actor.human(people.approver))
    pages = {
        people.operator: ["/", "/alerts/", "/fleet/", f"/work/{scene.key}", "/takeovers/standing/"],
        people.approver: ["/takeovers/pending/", f"/executors/{scene.agent.id}"],
        people.manager: [
            "/audit/",
            "/takeovers/interventions/",
            "/takeovers/interventions/summary",
        ],
    }
    for user, urls in pages.items():
        client = _client(user)
        for url in urls:
            html = client.get(url).content.decode()
            assert 'class="skip-link" href="#main"' in html and '<main id="main"' in html, url
            navs = re.findall(r"<nav\b[^>]*>", html)
            assert navs and all("aria-label=" in n for n in navs), url  # every nav named
            assert not re.search(r"<th[^>]*>\s*</th>", html), url
            assert "aria-live" not in html.replace('id="announcer"', "").split("<main", 1)[1], url


def test_a_renewal_gap_past_the_threshold_is_said_in_words(operator_client, agent):
    executor, _ = agent()
    lease = leased_item(executor, key="gap-1")
    age_lease(lease.id, lease.jeopardy_after_ms + 500)
    lease_renew(lease_id=lease.id, executor=executor, epoch=1)
    html = operator_client.get("/work/gap-1").content.decode()
    assert "past the 10.0 s threshold" in html and "past the jeopardy threshold" in html
    live = operator_client.get("/").content.decode()
    assert "past the 10.0 s jeopardy threshold" in live
