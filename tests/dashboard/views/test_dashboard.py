"""Dashboard views: roles, CSRF, fixed query counts, live certainty, versions, audit."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaseboard.core.models import Alert, AuditEntry, Effect, Lease
from leaseboard.core.services.leases import lease_renew
from tests.builders import PASSWORD, age_lease, leased_item, make_user, stale_effect_on

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "live"}


def _queries(client: Client, url: str, **headers: str) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **headers)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries), response


# ------------------------------------------------------------------------- query counts


def test_live_page_and_fragment_run_a_fixed_number_of_queries_whatever_the_page_size(
    operator_client, agent
):
    executor, _ = agent()
    for _ in range(30):
        leased_item(executor)
    small, r_small = _queries(operator_client, "/?size=10")
    large, r_large = _queries(operator_client, "/?size=200")
    assert r_small.content.count(b'<tr id="lease-') == 10
    assert r_large.content.count(b'<tr id="lease-') == 30
    # session, user, roles, clock+counters, page, total, just ended, badge
    assert small == large == 8
    f_small, _ = _queries(operator_client, "/?size=10", **HX)
    f_large, _ = _queries(operator_client, "/?size=200", **HX)
    assert f_small == f_large == 7  # the fragment skips the header badge


def test_work_item_alerts_executor_and_audit_pages_have_fixed_query_counts(operator_client, agent):
    a, _ = agent()
    b, _ = agent()
    make_user("mia", "manager")
    few = leased_item(a, key="few")
    many = leased_item(a, key="many")
    for _ in range(12):
        lease_renew(lease_id=many.id, executor=a, epoch=many.epoch)
    stale_effect_on("few", a, b)
    for i in range(3):
        stale_effect_on("many", a if i % 2 == 0 else b, b if i % 2 == 0 else a)
    assert Effect.objects.filter(work_item__key="many").count() == 3

    counts = {}
    for key in ("few", "many"):
        counts[key], response = _queries(operator_client, f"/work/{key}")
        assert b"epoch" in response.content
    assert counts["few"] == counts["many"] == 13  # auth 3 + item, clock, leases, effects,
    # checkpoints, alerts, audit, the pending takeover, badge, effect kinds' display hints

    ex_few, _ = _queries(operator_client, f"/executors/{b.id}")
    ex_many, _ = _queries(operator_client, f"/executors/{a.id}")
    assert ex_few == ex_many == 10  # auth 3 + executor, clock, live, recent, refusals,
    # quarantines, badge

    grouped, _ = _queries(operator_client, "/alerts/")
    every, _ = _queries(operator_client, "/alerts/?state=all")
    for i in range(5):  # the item's holder is b now
        stale_effect_on("many", b if i % 2 == 0 else a, a if i % 2 == 0 else b)
    grouped_more, _ = _queries(operator_client, "/alerts/")
    # auth 3 + clock, groups, their latest messages, snoozes in force, badge
    assert grouped == every == grouped_more == 8
    listed, _ = _queries(operator_client, "/alerts/?view=list&state=all")
    assert listed == 6  # auth 3 + clock, the page, badge
    assert few.epoch == 1


# ------------------------------------------------------------------------- roles

READ_URLS = ["/", "/alerts/", "/alerts/badge", "/work/rk", "/executors/{ex}"]


def test_every_view_refuses_a_user_without_a_role_and_sends_strangers_to_sign_in(client, agent):
    executor, _ = agent()
    leased_item(executor, key="rk")
    alert = Alert.objects.create(
        kind="jeopardy", dedupe_key="x", message="m", opened_at_ms=1, work_item=None
    )
    urls = [u.format(ex=executor.id) for u in READ_URLS] + ["/audit/"]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url
    assert client.get("/", **HX).status_code == 401
    client.force_login(make_user("nobody"))
    for url in urls:
        assert client.get(url).status_code == 403, url
        assert client.get(url, **HX).status_code == 403, url
    response = client.post(f"/alerts/{alert.id}/acknowledge", {"note": "x"})
    assert response.status_code == 403


@pytest.mark.parametrize("role", ["approver", "manager"])
def test_only_an_operator_may_acknowledge(client, role):
    alert = Alert.objects.create(kind="jeopardy", dedupe_key="k", message="m", opened_at_ms=1)
    client.force_login(make_user(f"u-{role}", role))
    assert client.get("/alerts/").status_code == 200  # reading is fine
    response = client.post(f"/alerts/{alert.id}/acknowledge", {"note": "on it"})
    assert response.status_code == 403
    alert.refresh_from_db()
    assert alert.acknowledged_at_ms is None
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("role,status", [("operator", 403), ("approver", 403), ("manager", 200)])
def test_the_audit_log_is_for_managers(client, role, status):
    client.force_login(make_user(f"a-{role}", role))
    assert client.get("/audit/").status_code == status


def test_create_user_command_puts_the_user_in_the_role(db, capsys):
    call_command("create_user", "carol", "--role", "approver", "--password", PASSWORD)
    from django.contrib.auth import authenticate

    user = authenticate(username="carol", password=PASSWORD)
    assert user is not None
    assert list(user.groups.values_list("name", flat=True)) == ["approver"]
    call_command("create_user", "dave", "--role", "operator", "--role", "manager")
    out = capsys.readouterr().out
    # No password for someone else: a one-time link with which dave chooses his own.
    assert "one-time set-password link" in out and "/account/set-password/" in out
    from django.contrib.auth.models import User

    assert set(User.objects.get(username="dave").groups.values_list("name", flat=True)) == {
        "operator",
        "manager",
    }


# ------------------------------------------------------------------------- CSRF


def _csrf(client: Client, url: str) -> str:
    page = client.get(url)
    match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert match, url
    return match.group(1).decode()


def test_acknowledge_needs_the_csrf_token_and_records_an_audit_entry(operator, agent):
    executor, _ = agent()
    lease = leased_item(executor, key="ack-me")
    alert = Alert.objects.create(
        kind="jeopardy",
        dedupe_key="jeopardy:1",
        message="missed renewals",
        opened_at_ms=1,
        lease=lease,
        work_item=lease.work_item,
        epoch=lease.epoch,
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    url = f"/alerts/{alert.id}/acknowledge"
    assert client.post(url, {"note": "looking"}).status_code == 403
    alert.refresh_from_db()
    assert alert.acknowledged_at_ms is None

    token = _csrf(client, "/alerts/")
    response = client.post(
        url,
        {"note": "restarting the agent", "csrfmiddlewaretoken": token},
        HTTP_X_REQUEST_ID="req-123",
    )
    assert response.status_code == 302
    alert.refresh_from_db()
    assert alert.acknowledged_by == operator and alert.acknowledged_at_ms
    assert alert.acknowledge_note == "restarting the agent"
    entry = AuditEntry.objects.get(action="alert.acknowledge")
    assert (entry.actor_name, entry.actor_role, entry.reason, entry.request_id) == (
        "olivia",
        "operator",
        "restarting the agent",
        "req-123",
    )
    assert entry.before["acknowledged_at_ms"] is None
    assert entry.after["acknowledged_by"] == "olivia"
    assert entry.work_item_id == lease.work_item_id

    # Through htmx, the token travels in the X-CSRFToken header set on <body>.
    alert2 = Alert.objects.create(kind="expired", dedupe_key="e:2", message="m", opened_at_ms=2)
    url2 = f"/alerts/{alert2.id}/acknowledge"
    assert client.post(url2, {"note": "x"}, HTTP_HX_REQUEST="true").status_code == 403
    response = client.post(url2, {"note": "x"}, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200 and b"acknowledged by" in response.content
    # A second click changes nothing and writes nothing.
    client.post(url2, {"note": "again"}, HTTP_HX_REQUEST="true", HTTP_X_CSRFTOKEN=token)
    assert AuditEntry.objects.filter(action="alert.acknowledge").count() == 2


def test_an_empty_note_is_a_form_error_not_a_write(operator_client):
    alert = Alert.objects.create(kind="jeopardy", dedupe_key="n", message="m", opened_at_ms=1)
    response = operator_client.post(
        f"/alerts/{alert.id}/acknowledge", {"note": "  "}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and b'role="alert"' in response.content
    assert not AuditEntry.objects.exists()
    assert operator_client.post("/alerts/999999/acknowledge", {"note": "x"}).status_code == 404


def test_sign_in_and_sign_out_need_the_csrf_token():
    make_user("erin", "operator")
    client = Client(enforce_csrf_checks=True)
    creds = {"username": "erin", "password": PASSWORD}
    assert client.post("/login/", creds).status_code == 403
    token = _csrf(client, "/login/")
    response = client.post("/login/", {**creds, "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 403
    token = _csrf(client, "/")
    assert client.post("/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get("/").status_code == 302


def test_viewing_never_writes_audit_rows(operator_client, agent):
    a, _ = agent()
    b, _ = agent()
    leased_item(a, key="v1")
    stale_effect_on("v1", a, b)
    before = AuditEntry.objects.count()
    for url in [
        "/",
        "/alerts/",
        "/alerts/?show=all",
        "/alerts/badge",
        "/work/v1",
        f"/executors/{a.id}",
    ]:
        assert operator_client.get(url).status_code == 200
    assert AuditEntry.objects.count() == before


# ------------------------------------------------------------------------- live leases


def _row(html: bytes, lease: Lease) -> str:
    match = re.search(rf'<tr id="lease-{lease.id}" data-certainty="(\w+)"', html.decode())
    return match.group(1) if match else ""


def test_certainty_is_computed_from_time_before_any_sweep(operator_client, agent):
    executor, _ = agent()
    lease = leased_item(executor)
    assert _row(operator_client.get("/").content, lease) == "active"
    age_lease(lease.id, lease.jeopardy_after_ms + 100)
    page = operator_client.get("/", **HX)
    assert _row(page.content, lease) == "jeopardy" and b"JEOPARDY" in page.content
    age_lease(lease.id, lease.ttl_ms)
    page = operator_client.get("/", **HX)
    assert _row(page.content, lease) == "expired" and b"EXPIRED" in page.content
    lease.refresh_from_db()
    assert lease.state == "active"  # nothing was written: the page computed it


def test_the_fragment_answers_304_while_nothing_changed(operator_client, agent):
    executor, _ = agent()
    lease = leased_item(executor)
    first = operator_client.get("/", **HX)
    version = first["X-Leaseboard-Version"]
    assert f'data-version="{version}"'.encode() in first.content
    assert int(first["X-Leaseboard-Seq"]) > 0
    same = operator_client.get("/", HTTP_X_LEASEBOARD_VERSION=version, **HX)
    assert same.status_code == 304 and same.content == b""
    assert same["Cache-Control"] == "no-store"
    lease_renew(lease_id=lease.id, executor=executor, epoch=lease.epoch)
    changed = operator_client.get("/", HTTP_X_LEASEBOARD_VERSION=version, **HX)
    assert changed.status_code == 200 and changed["X-Leaseboard-Version"] != version


def test_keyset_pages_visit_every_live_lease_once(operator_client, agent):
    executor, _ = agent()
    ids = {str(leased_item(executor).id) for _ in range(23)}
    seen: list[str] = []
    url = "/?size=10"
    while url:
        html = operator_client.get(url, **HX).content.decode()
        seen += re.findall(r'<tr id="lease-([0-9a-f-]{36})"', html)
        nxt = re.search(r'href="(/\?[^"]*cursor=[^"]+)"[^>]*rel="next"', html)
        url = nxt.group(1).replace("&amp;", "&") if nxt else ""
    assert len(seen) == 23 and set(seen) == ids


def test_filters_and_search(operator_client, agent):
    a, _ = agent("alpha-agent")
    b, _ = agent("beta-agent")
    la = leased_item(a, key="invoice-17")
    lb = leased_item(b, key="deploy-3")
    age_lease(lb.id, lb.jeopardy_after_ms + 10)

    def rows(url: str) -> set[str]:
        html = operator_client.get(url, **HX).content.decode()
        return set(re.findall(r'<tr id="lease-([0-9a-f-]{36})"', html))

    assert rows("/?q=voice") == {str(la.id)}
    assert rows("/?holder=beta-agent") == {str(lb.id)}
    assert rows("/?certainty=jeopardy") == {str(lb.id)}
    assert rows("/?certainty=active") == {str(la.id)}
    assert rows("/?queue=default") == {str(la.id), str(lb.id)}
    assert rows("/?queue=nope") == set()
    html = operator_client.get("/", **HX).content.decode()
    assert re.search(r'data-counter="active"[^>]*>1<', html)
    assert re.search(r'data-counter="jeopardy"[^>]*>1<', html)


def test_search_pages_stay_right_after_their_statements_are_prepared(
    operator_client, agent, monkeypatch
):
    """A search's statements are prepared once they have run a few times on a connection
    (more than psycopg's threshold of 5 here); its pages, total and misses stay right, and
    a broad search (more matches than are read as ids) gives the same rows unprepared."""
    from leaseboard.dashboard.selectors import live_query

    executor, _ = agent()
    ids = {str(leased_item(executor, key=f"refund-{i}").id) for i in range(7)}
    leased_item(executor, key="deploy-1")

    def page(url: str) -> tuple[list[str], str]:
        html = operator_client.get(url, **HX).content.decode()
        return re.findall(r'<tr id="lease-([0-9a-f-]{36})"', html), html

    for _ in range(8):
        first, html = page("/?q=REFUND&size=5")
        assert len(first) == 5 and "of 7," in html
        cursor = re.search(r'href="(/\?[^"]*cursor=[^"]+)"[^>]*rel="next"', html)
        assert cursor
        rest, _ = page(cursor.group(1).replace("&amp;", "&"))
        assert set(first) | set(rest) == ids and len(rest) == 2
        missing, html = page("/?q=no-such-key")
        assert missing == [] and "No leases match." in html
    monkeypatch.setattr(live_query, "SEARCH_IDS_CAP", 3)  # 7 matches: a subquery, not ids
    broad, html = page("/?q=refund")
    assert set(broad) == ids and "of 7," in html


def _counters_scene(executor) -> None:  # type: ignore[no-untyped-def]
    """Leases in every place the counters look: 2 active, 2 in jeopardy (one past its
    jeopardy time, one marked by a sweep), 3 expired in the last hour (one ended by a
    sweep, one active and one marked in jeopardy that reached their expiry unswept), and two
    the counters skip (one released, one expired over an hour ago)."""
    from leaseboard.core.services.leases import lease_release
    from leaseboard.sweeps import services

    for _ in range(2):
        leased_item(executor)
    marked, marked_lapsed, swept, swept_old, released = (leased_item(executor) for _ in range(5))
    for lease in (marked, marked_lapsed, swept, swept_old):
        age_lease(lease.id, lease.jeopardy_after_ms + 100)
    assert services.sweep_run().jeopardy == 4
    for lease in (swept, swept_old):
        age_lease(lease.id, lease.ttl_ms)
    assert services.sweep_run().expired == 2
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE core_lease SET ended_at_ms = ended_at_ms - 3600001 WHERE id = %s",
            [str(swept_old.id)],
        )
    lease_release(lease_id=released.id, executor=executor, epoch=released.epoch)
    # After the last sweep: time alone moves these.
    overdue, lapsed = leased_item(executor), leased_item(executor)
    age_lease(overdue.id, overdue.jeopardy_after_ms + 100)
    age_lease(lapsed.id, lapsed.ttl_ms + 100)
    age_lease(marked_lapsed.id, marked_lapsed.ttl_ms)
    states = sorted(Lease.objects.values_list("state", flat=True))
    assert states == ["active"] * 4 + ["expired"] * 2 + ["jeopardy"] * 2 + ["released"]


def test_the_counters_count_each_lease_where_its_time_and_state_put_it(operator_client, agent):
    from leaseboard.dashboard.selectors.live import live_counters

    executor, _ = agent()
    _counters_scene(executor)
    _, counters = live_counters()
    assert (counters.active, counters.jeopardy, counters.expired_last_hour) == (2, 2, 3)
    html = operator_client.get("/", **HX).content.decode()
    for name, value in (("active", 2), ("jeopardy", 2), ("expired", 3)):
        assert re.search(rf'data-counter="{name}"[^>]*>{value}<', html), name


def test_each_counter_stops_one_past_its_cap(agent, monkeypatch):
    from leaseboard.dashboard.selectors import counters as live

    executor, _ = agent()
    _counters_scene(executor)
    for _ in range(3):
        leased_item(executor)  # 5 active
    monkeypatch.setattr(live, "COUNTER_CAP", 2)
    _, counters = live.live_counters()
    assert (counters.active, counters.jeopardy, counters.expired_last_hour) == (3, 2, 3)
    monkeypatch.setattr(live, "COUNTER_CAP", 1)
    _, counters = live.live_counters()
    assert (counters.active, counters.jeopardy, counters.expired_last_hour) == (2, 2, 2)


def test_a_backlog_longer_than_its_walk_gives_lower_bounds_shown_with_a_plus(
    operator_client, agent, monkeypatch
):
    """The sweep's backlog (active leases past their jeopardy time) is read up to
    BACKLOG_WALK entries from each end, so a storm's 47,000 cost what 2,000 do: while it
    is longer, the in-jeopardy and expired counts are lower bounds, shown "N+", with the
    backlog beside them; the jeopardy rank is still read (its size is exact to the cap)."""
    from leaseboard.dashboard.selectors import counters as live

    executor, _ = agent()
    _counters_scene(executor)
    html = operator_client.get("/", **HX).content.decode()
    assert 'id="count-behind"' not in html  # the backlog of 2 read whole: exact
    second = leased_item(executor)
    age_lease(second.id, second.jeopardy_after_ms + 100)  # backlog: 2 overdue, 1 lapsed
    _, counters = live.live_counters()
    assert counters.split_exact and (counters.jeopardy, counters.expired_last_hour) == (3, 3)
    monkeypatch.setattr(live, "BACKLOG_WALK", 1)
    _, counters = live.live_counters()
    # Newest first, one entry: one of the two overdue; oldest first: the lapsed one.
    assert (counters.behind, counters.split_exact) == (1, False)
    assert (counters.jeopardy, counters.expired_last_hour) == (2, 3)
    assert counters.urgent == 3  # the backlog's 1 read, the 2 a sweep marked
    html = operator_client.get("/", **HX).content.decode()
    for name, shown in (("jeopardy", "2+"), ("expired", "3+"), ("behind", "1")):
        assert re.search(rf'data-counter="{name}"[^>]*>{re.escape(shown)}<', html), name
    assert "the sweeps are behind" in html
    assert live.Counters(active=0, jeopardy=1001, expired_last_hour=0).jeopardy_shown == "1000+"


def test_work_item_page_shows_the_refused_stale_effect_and_the_timeline(operator_client, agent):
    a, _ = agent("old-holder")
    b, _ = agent("new-holder")
    lease = leased_item(a, key="pay-9")
    for _ in range(3):
        lease_renew(lease_id=lease.id, executor=a, epoch=lease.epoch)
    stale_effect_on("pay-9", a, b)
    html = operator_client.get("/work/pay-9").content.decode()
    assert "epoch 1 tried, current 2" in html
    assert "stale_epoch" in html
    assert "acquire" in html and "ttl elapsed" in html
    assert html.count("<rect ") == 0  # the new holder's lease has not renewed yet
    chart = operator_client.get(f"/work/pay-9?lease={lease.id}").content.decode()
    assert chart.count("<rect ") == 3 and 'class="threshold"' in chart
    assert "Renewals of epoch 1" in chart
    assert "stale effect" in html  # the alert the refusal opened
    ex = operator_client.get(f"/executors/{a.id}").content.decode()
    assert "stale_epoch" in ex and "pay-9" in ex
    assert operator_client.get("/work/missing").status_code == 404


def test_every_page_has_the_alert_badge_and_the_csrf_header(operator_client):
    Alert.objects.create(kind="jeopardy", dedupe_key="b1", message="m", opened_at_ms=1)
    for url in ["/", "/alerts/"]:
        html = operator_client.get(url).content.decode()
        assert 'id="alert-badge"' in html and ">1</span>" in html
        assert 'hx-headers=\'{"X-CSRFToken":' in html
        assert "django_htmx/htmx" in html  # bundled, not a CDN


def test_a_held_work_item_shows_its_hold_after_its_lease_ended(operator_client, api, agent):
    """The hold is the item's: the item page, its timeline and the live list say so after
    the lease it was put on through has been released."""
    from leaseboard.core.authority import Actor
    from leaseboard.core.services import holds
    from tests.builders import make_user

    _, token = agent("held-agent")
    api.post("/api/v1/work-items", {"key": "held-1"}, token)
    grant = api.post("/api/v1/work-items/held-1/lease", {}, token).json_body
    holds.lease_hold(
        lease_id=grant["lease_id"],
        actor=Actor.human(make_user("olga-page", "operator")),
        reason_category="misbehaving",
        reason_text="double refunds",
    )
    api.post(f"/api/v1/leases/{grant['lease_id']}/release", {"epoch": 1}, token)

    page = operator_client.get("/work/held-1").content.decode()
    assert 'class="hold-fact" data-on-hold>on hold since' in page
    assert "<b>misbehaving: double refunds</b>" in page
    assert 'id="hold-release-form"' in page  # an operator may release it, lease ended or not
    assert "ended on hold</span>" in page  # the timeline row of the lease it was put through
    live = operator_client.get("/").content.decode()
    assert ">item on hold</span>" in live
