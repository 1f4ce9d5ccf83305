"""API rate limits through the HTTP stack: per credential and per address, 429 `rate_limited`
with Retry-After, the proxy setting respected, honest fleets untouched, Redis shared by
every process and the embedded fallback. Counts and order only; nothing is timed."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from leaseboard.api import ratelimit
from leaseboard.envconf import env_rate

pytestmark = pytest.mark.django_db

FORGED = "lb_forged-token"


def renew(client: Any, token: str, lease_id: str, epoch: int, **meta: str) -> Any:
    return client.post(
        f"/api/v1/leases/{lease_id}/renew",
        data=json.dumps({"epoch": epoch}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **meta,
    )


def forged_call(client: Any, token: str = FORGED, **meta: str) -> Any:
    return client.post(
        "/api/v1/leases/renew",
        data=json.dumps({"leases": []}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **meta,
    )


def grant(api: Any, token: str, key: str) -> dict[str, Any]:
    assert api.post("/api/v1/work-items", {"key": key}, token).status_code == 201
    r = api.post(f"/api/v1/work-items/{key}/lease", {}, token)
    assert r.status_code == 201, r.content
    return r.json_body


def assert_rate_limited(r: Any, limit: str, window_s: int) -> None:
    assert r.status_code == 429, r.content
    assert r["Content-Type"].startswith("application/problem+json")
    body = json.loads(r.content)
    assert (body["code"], body["status"], body["limit"]) == ("rate_limited", 429, limit)
    assert 1 <= int(r["Retry-After"]) <= window_s
    assert body["retry_after_ms"] >= 1


# -- defaults: an honest fleet never meets a limit ------------------------------------------


def test_an_honest_fleet_on_one_address_never_sees_a_429_under_the_defaults(api, agent):
    """A minute of a normal fleet, all from one address (as behind a NAT) and all inside one
    window: twenty single-lease agents renewing every 5 s and a batch renewer holding 100
    leases, acquired one request each, renewing them every 5 s in one request."""
    singles = []
    for n in range(20):
        _, token = agent(f"single-{n}")
        singles.append((token, grant(api, token, f"single-{n}")))
    _, batch_token = agent("batch")
    held = [grant(api, batch_token, f"batch-{n}") for n in range(100)]

    statuses = []
    for _tick in range(12):  # 60 s at one renew per 5 s
        for token, lease in singles:
            statuses.append(renew(api.client, token, lease["lease_id"], lease["epoch"]).status_code)
        leases = [{"lease_id": g["lease_id"], "epoch": g["epoch"]} for g in held]
        r = api.post("/api/v1/leases/renew", {"leases": leases}, batch_token)
        statuses.append(r.status_code)
        assert all(item["ok"] for item in r.json_body["results"])
    assert statuses == [200] * (12 * 21)


def test_a_bad_token_flood_does_not_throttle_honest_agents_on_the_same_address(api, agent):
    _, token = agent()
    lease = grant(api, token, "shared-nat")
    flood = [forged_call(api.client, f"lb_forged-{i}").status_code for i in range(100)]
    assert flood[-1] == 429
    assert renew(api.client, token, lease["lease_id"], lease["epoch"]).status_code == 200


# -- per credential ---------------------------------------------------------------------------


def test_a_runaway_credential_meets_429_and_others_do_not(api, agent, settings):
    settings.LEASEBOARD_RATE_LIMIT_AGENT = (5, 60)
    _, runaway = agent("runaway")
    _, calm = agent("calm")
    lease = grant(api, runaway, "runaway-1")  # two requests of its five
    statuses = [
        renew(api.client, runaway, lease["lease_id"], lease["epoch"]).status_code for _ in range(5)
    ]
    assert statuses == [200, 200, 200, 429, 429]
    assert_rate_limited(
        renew(api.client, runaway, lease["lease_id"], lease["epoch"]), "credential", 60
    )
    assert api.get("/api/v1/work-items/runaway-1", calm).status_code == 200


def test_recipient_paths_have_their_own_budget(api, agent, settings):
    settings.LEASEBOARD_RATE_LIMIT_AGENT = (1, 60)
    settings.LEASEBOARD_RATE_LIMIT_RECIPIENT = (2, 60)
    _, token = agent("payments-recipient")
    assert api.get("/api/v1/work-items/none", token).status_code == 404
    assert api.get("/api/v1/work-items/none", token).status_code == 429
    report = {"work_key": "none", "epoch": 0, "high_water": 1, "reason": "stale_epoch"}
    statuses = [api.post("/api/v1/recipient-reports", report, token).status_code for _ in range(3)]
    assert 429 not in statuses[:2] and statuses[2] == 429
    assert_rate_limited(api.post("/api/v1/recipient-reports", report, token), "recipient", 60)


# -- per address ----------------------------------------------------------------------------------


def test_requests_without_a_credential_are_limited_per_address(client, settings):
    settings.LEASEBOARD_RATE_LIMIT_ADDRESS = (3, 60)
    statuses = [client.get("/api/v1/fencing/keys").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert_rate_limited(client.get("/api/v1/fencing/keys"), "address", 60)
    # Another address has its own budget.
    assert client.get("/api/v1/fencing/keys", REMOTE_ADDR="192.0.2.7").status_code == 200


def test_a_spoofed_forwarded_for_is_ignored_unless_proxies_are_trusted(client, settings):
    settings.LEASEBOARD_RATE_LIMIT_ADDRESS = (3, 60)
    settings.LEASEBOARD_TRUSTED_PROXIES = 0
    statuses = [
        forged_call(client, HTTP_X_FORWARDED_FOR=f"198.51.100.{i}").status_code for i in range(5)
    ]
    assert statuses == [401, 401, 401, 429, 429]  # one peer, whatever it claims


def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_budget(client, settings):
    settings.LEASEBOARD_RATE_LIMIT_ADDRESS = (2, 60)
    settings.LEASEBOARD_TRUSTED_PROXIES = 1
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    # The proxy appends the address it saw; what the client put in front is not trusted.
    first = [
        forged_call(client, HTTP_X_FORWARDED_FOR=f"203.0.113.{i}, 198.51.100.1", **proxy)
        for i in range(3)
    ]
    assert [r.status_code for r in first] == [401, 401, 429]
    second = forged_call(client, HTTP_X_FORWARDED_FOR="198.51.100.2", **proxy)
    assert second.status_code == 401


def test_the_client_address_is_the_nth_forwarded_entry_from_the_right(rf, settings):
    settings.LEASEBOARD_TRUSTED_PROXIES = 2
    request = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9, 10.0.0.1")
    assert ratelimit.client_address(request) == "203.0.113.9"
    settings.LEASEBOARD_TRUSTED_PROXIES = 0
    assert ratelimit.client_address(request) == "127.0.0.1"
    assert ratelimit.client_address(rf.get("/", REMOTE_ADDR="not-an-ip")) is None


# -- the off switch and the settings --------------------------------------------------------------


def test_the_off_switch_lifts_every_limit(client, settings):
    settings.LEASEBOARD_RATE_LIMIT_ENABLED = False
    assert {forged_call(client, f"lb_forged-{i}").status_code for i in range(200)} == {401}


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [("600/m", (600, 60)), ("10/s", (10, 1)), ("5000/h", (5000, 3600)), ("off", None)],
)
def test_a_rate_setting_parses(monkeypatch, raw, parsed):
    monkeypatch.setenv("LEASEBOARD_RATE_LIMIT_AGENT", raw)
    assert env_rate("LEASEBOARD_RATE_LIMIT_AGENT", "600/m") == parsed


@pytest.mark.parametrize("raw", ["600", "600/min", "-1/m", "many/m", "0/m"])
def test_a_bad_rate_setting_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("LEASEBOARD_RATE_LIMIT_ADDRESS", raw)
    with pytest.raises(ImproperlyConfigured, match="LEASEBOARD_RATE_LIMIT_ADDRESS"):
        env_rate("LEASEBOARD_RATE_LIMIT_ADDRESS", "60/m")


# -- where the counters live ----------------------------------------------------------------------


@pytest.mark.redis
def test_with_redis_every_process_shares_one_budget(client, settings, redis_url):
    """Two limiters (as in two web processes) count into the same Redis window."""
    import redis

    settings.REDIS_URL = redis_url
    settings.LEASEBOARD_RATE_LIMIT_AGENT = (4, 60)
    credential = uuid.uuid4().hex
    one, two = ratelimit.Limiter(redis_url), ratelimit.Limiter(redis_url)
    verdicts = [
        (one if n % 2 else two).admit(credential=credential, address="192.0.2.1") for n in range(6)
    ]
    assert [v.allowed for v in verdicts] == [True, True, True, True, False, False]
    assert verdicts[-1].limit == "credential" and 1 <= verdicts[-1].retry_after_s <= 60
    # And through the middleware, which picks the Redis limiter from the settings.
    assert isinstance(ratelimit.limiter().redis, ratelimit.RedisWindows)
    settings.LEASEBOARD_RATE_LIMIT_ADDRESS = (2, 60)
    address = f"192.0.2.{uuid.uuid4().int % 200 + 1}"
    statuses = [forged_call(client, REMOTE_ADDR=address).status_code for _ in range(3)]
    assert statuses == [401, 401, 429]
    store = redis.Redis.from_url(redis_url)
    try:
        keys = list(store.scan_iter(match=f"{ratelimit.KEY_PREFIX}*"))
        assert keys and all(0 < store.ttl(k) <= 60 for k in keys)
    finally:
        for key in store.scan_iter(match=f"{ratelimit.KEY_PREFIX}*"):
            store.delete(key)
        store.close()


def test_when_redis_is_unreachable_limits_fall_back_to_this_process(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # the discard port: nothing listens
    settings.LEASEBOARD_RATE_LIMIT_ADDRESS = (2, 60)
    statuses = [forged_call(client).status_code for _ in range(3)]
    assert statuses == [401, 401, 429]  # answered, and still limited
