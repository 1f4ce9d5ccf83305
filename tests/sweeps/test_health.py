"""A stopped sweep is loud (docs/design.md §14): /healthz reports the last completed sweep's age and
`stale`, /metrics exports it, and every dashboard page shows the banner, read in the alert
badge's own statement. /healthz answers 503 only when this node cannot reach its database;
a broker or sweep outage is in the body under 200, as every node shares them."""

from __future__ import annotations

import re
import socket

import pytest
from django.test import Client

from leaseboard.core.clock import db_now_ms
from leaseboard.sweeps import services
from leaseboard.sweeps.health import database_check, sweep_age, sweep_age_now, sweeps_check
from leaseboard.sweeps.models import SweepState
from tests.builders import make_user

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _age_last_sweep(ms: int) -> None:
    SweepState.objects.filter(id=1).update(
        last_completed_at_ms=services.db_now_ms() - ms, last_sweep_at_ms=services.db_now_ms() - ms
    )


def test_healthz_reports_sweeps_never_run_then_fresh_then_stale(client, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_SWEEPS_STALE_AFTER_S = 10
    never = client.get("/healthz")
    assert never.status_code == 200
    assert never.json()["checks"]["sweeps"] == {
        "ok": False,
        "stale": True,
        "last_completed_at_ms": None,
        "age_s": None,
        "stale_after_s": 10,
    }
    assert never.json()["ok"] is False and never.json()["serving"] is True
    services.sweep_run()
    fresh = client.get("/healthz").json()
    assert fresh["checks"]["sweeps"]["stale"] is False and fresh["checks"]["sweeps"]["age_s"] < 5
    _age_last_sweep(11_000)
    stale = client.get("/healthz")
    assert stale.status_code == 200  # the web node still serves: the load balancer keeps it
    sweeps = stale.json()["checks"]["sweeps"]
    assert sweeps["stale"] is True and sweeps["age_s"] >= 11


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_healthz_with_the_broker_unreachable_still_answers_200_naming_it(client, celery_conf):  # type: ignore[no-untyped-def]
    # Was 503: every web node shares the broker, so a load balancer would take them all out
    # while the API keeps deciding without Redis. The body says what is down.
    celery_conf(broker_url=f"redis://127.0.0.1:{_closed_port()}/0")
    services.sweep_run()
    answer = client.get("/healthz")
    assert answer.status_code == 200
    body = answer.json()
    assert body["checks"]["broker"]["ok"] is False and body["ok"] is False
    assert body["serving"] is True and body["checks"]["database"]["ok"] is True


def test_metrics_export_the_last_completed_sweep_and_the_outboxes(client):  # type: ignore[no-untyped-def]
    text = client.get("/metrics").content.decode()
    assert "leaseboard_sweep_last_completed_timestamp_seconds 0.0" in text
    assert "leaseboard_sweep_stale 1.0" in text
    services.sweep_run()
    last = SweepState.objects.get(id=1).last_completed_at_ms
    text = client.get("/metrics").content.decode()
    exported = re.search(r"^leaseboard_sweep_last_completed_timestamp_seconds (\S+)$", text, re.M)
    assert exported and float(exported.group(1)) == pytest.approx(last / 1000)
    assert "leaseboard_sweep_stale 0.0" in text
    for outbox in ("alert_deliveries", "approval_notices", "epoch_notices"):
        assert f'leaseboard_outbox_pending{{outbox="{outbox}"}} 0.0' in text
        assert f'leaseboard_outbox_oldest_due_seconds{{outbox="{outbox}"}} 0.0' in text


@pytest.fixture
def viewer() -> Client:
    client = Client()
    client.force_login(make_user("watch", "operator"))
    return client


BANNER = "leases are not being ended or alerted"


def test_every_page_shows_the_banner_while_sweeps_are_stale_and_not_when_fresh(
    viewer, settings, fast_passwords
):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_SWEEPS_STALE_AFTER_S = 10
    page = viewer.get("/").content.decode()
    assert "Expiry sweeps have never completed" in page and BANNER in page
    services.sweep_run()
    for path in ("/", "/alerts/", "/fleet/"):
        assert BANNER not in viewer.get(path).content.decode(), path
    _age_last_sweep(150_000)
    for path in ("/", "/alerts/", "/fleet/"):
        page = viewer.get(path).content.decode()
        assert "Expiry sweeps stopped 2 min ago" in page and BANNER in page, path


def test_every_role_sees_the_banner(settings, fast_passwords):  # type: ignore[no-untyped-def]
    for role in ("operator", "approver", "manager", "admin"):
        client = Client()
        client.force_login(make_user(f"r-{role}", role))
        landing = "/settings/" if role == "admin" else "/"
        page = client.get(landing, follow=True).content.decode()
        assert BANNER in page, role


def test_the_badge_poll_brings_the_banner_when_the_page_shows_otherwise(viewer, settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_SWEEPS_STALE_AFTER_S = 10
    services.sweep_run()
    hx = {"HTTP_HX_REQUEST": "true"}
    same = viewer.get("/alerts/badge?sweeps_shown=0", **hx).content.decode()
    assert 'id="sweeps-banner"' not in same  # nothing changed: no out-of-band swap
    _age_last_sweep(60_000)
    changed = viewer.get("/alerts/badge?sweeps_shown=0", **hx).content.decode()
    assert 'id="sweeps-banner" hx-swap-oob="true"' in changed and BANNER in changed
    shown = viewer.get("/alerts/badge?sweeps_shown=1", **hx).content.decode()
    assert 'id="sweeps-banner"' not in shown


# -- the checks themselves (leaseboard.sweeps.health), as /healthz and /metrics read them --


def test_the_sweep_age_is_read_on_the_database_clock_and_stale_past_the_setting(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_SWEEPS_STALE_AFTER_S = 30
    assert sweep_age_now(None, 5_000).stale is True  # no sweep ever completed
    assert sweep_age_now(1_000, 31_000).stale is False  # exactly the bound: not yet
    assert sweep_age_now(1_000, 31_001).stale is True
    SweepState.objects.filter(id=1).delete()
    assert sweep_age().stale is True and sweep_age().age_s is None  # no sweep ever started
    now = db_now_ms()
    SweepState.objects.create(id=1, last_sweep_at_ms=now, last_completed_at_ms=now - 40_000)
    age = sweep_age()
    assert age.stale is True and age.age_s is not None and age.age_s >= 40
    SweepState.objects.filter(id=1).update(last_completed_at_ms=db_now_ms())
    assert sweep_age().stale is False


def test_the_sweeps_check_says_what_the_banner_and_the_metrics_say(settings):  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_SWEEPS_STALE_AFTER_S = 10
    done = db_now_ms() - 12_000
    SweepState.objects.update_or_create(
        id=1, defaults={"last_completed_at_ms": done, "last_sweep_at_ms": done}
    )
    check = sweeps_check()
    assert (check["ok"], check["stale"], check["last_completed_at_ms"]) == (False, True, done)
    assert check["stale_after_s"] == 10 and 12 <= float(check["age_s"]) < 60  # type: ignore[arg-type]
    assert database_check() == {"ok": True, "vendor": "postgresql"}
