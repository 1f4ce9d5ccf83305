"""The agents' lane (leaseboard/api/lane.py): a bearer request under /api/ runs the lane's
middleware alone and the API's own URL map; every other request runs the full stack. Built
on Django's documented middleware interface only, so these tests, not a pinned Django
version, say it still works."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.utils.module_loading import import_string

from leaseboard.api import lane
from tests.conftest import ApiClient

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# What an agent's request runs, in order; a middleware added to MIDDLEWARE must either be
# wrapped in BrowserOnly or be added here on purpose.
RUNS_ON_LANE = [
    "leaseboard.api.lane.ApiLaneMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "leaseboard.api.middleware.DatabaseGuardMiddleware",
    "leaseboard.api.middleware.ApiBodyLimitMiddleware",
    "leaseboard.api.middleware.ApiRateLimitMiddleware",
    "axes.middleware.AxesMiddleware",
]


def test_every_middleware_is_either_on_the_lane_or_browser_only() -> None:
    on_lane = [
        path
        for path in django_settings.MIDDLEWARE
        if not issubclass(import_string(path), lane.BrowserOnly)
    ]
    assert on_lane == RUNS_ON_LANE
    for path in django_settings.MIDDLEWARE:
        cls = import_string(path)
        if issubclass(cls, lane.BrowserOnly):
            # Named after what it wraps, so settings read like Django's own list.
            assert cls.wraps.rsplit(".", 1)[1] == cls.__name__
            import_string(cls.wraps)


def _fresh_api(settings, on: bool) -> ApiClient:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_API_LANE = on  # read when a new client loads its middleware
    return ApiClient(Client())


@pytest.mark.parametrize("on", [True, False])
def test_an_agents_request_skips_the_browsers_middleware_only_on_the_lane(settings, agent, on):  # type: ignore[no-untyped-def]
    _, token = agent()
    api = _fresh_api(settings, on)
    r = api.post("/api/v1/work-items", {"key": "lane-1", "title": "t"}, token)
    assert r.status_code == 201, r.content
    browser_headers = {"X-Frame-Options", "Content-Security-Policy"} & set(r.headers)
    assert bool(browser_headers) is not on, r.headers
    if on:
        assert "Cookie" not in r.get("Vary", "")  # no session was read
    # The lane's own middleware answered on both chains: security headers.
    assert r["X-Content-Type-Options"] == "nosniff"


def test_a_request_under_api_without_a_bearer_token_takes_the_full_stack(
    settings,
):  # type: ignore[no-untyped-def]
    api = _fresh_api(settings, True)
    r = api.post("/api/v1/work-items", {"key": "lane-2", "title": "t"})
    assert r.status_code == 401
    assert "X-Frame-Options" in r.headers


def test_an_unknown_path_on_the_lane_is_a_problem_from_the_apis_own_url_map(settings, agent):  # type: ignore[no-untyped-def]
    _, token = agent()
    api = _fresh_api(settings, True)
    r = api.get("/api/v1/no-such-thing", token)
    assert r.status_code == 404
    assert r["Content-Type"].startswith("application/problem+json")
    assert r.json_body["code"] == "not_found"


class _Recorder:
    """A middleware with every hook, recording what it was called for."""

    calls: list[str] = []

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        self.calls.append("call")
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):  # type: ignore[no-untyped-def]
        self.calls.append("view")

    def process_exception(self, request, exception):  # type: ignore[no-untyped-def]
        self.calls.append("exception")

    def process_template_response(self, request, response):  # type: ignore[no-untyped-def]
        self.calls.append("template")
        return response


class _NoHooks:
    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)


class _WrapsRecorder(lane.BrowserOnly):
    wraps = "tests.api.test_lane._Recorder"


class _WrapsNoHooks(lane.BrowserOnly):
    wraps = "tests.api.test_lane._NoHooks"


def test_browser_only_has_a_hook_exactly_where_the_wrapped_middleware_has_one() -> None:
    with_hooks = _WrapsRecorder(lambda r: HttpResponse())
    without = _WrapsNoHooks(lambda r: HttpResponse())
    for hook in ("process_view", "process_exception", "process_template_response"):
        assert hasattr(with_hooks, hook)
        assert not hasattr(without, hook)  # Django collects hooks by hasattr


def test_browser_only_passes_a_lane_request_on_and_runs_the_middleware_for_others() -> None:
    _Recorder.calls = []
    wrapper = _WrapsRecorder(lambda r: HttpResponse("next"))
    agent_request = RequestFactory().post("/api/v1/leases/x/renew", HTTP_AUTHORIZATION="Bearer t")
    lane.ApiLaneMiddleware(wrapper)(agent_request)
    wrapper.process_view(agent_request, None, (), {})
    wrapper.process_exception(agent_request, RuntimeError())
    assert _Recorder.calls == []
    page_request = RequestFactory().get("/api/v1/docs")
    assert lane.ApiLaneMiddleware(wrapper)(page_request).content == b"next"
    wrapper.process_view(page_request, None, (), {})
    wrapper.process_exception(page_request, RuntimeError())
    wrapper.process_template_response(page_request, HttpResponse())
    assert _Recorder.calls == ["call", "view", "exception", "template"]
    assert getattr(agent_request, "urlconf", None) == lane.LANE_URLCONF
    assert not hasattr(page_request, "urlconf")


# deliberate: a table of cases, one row a case (data, alike in shape only).
@pytest.mark.parametrize(
    ("path", "authorization", "expected"),
    [
        ("/api/v1/leases/renew", "Bearer abc", True),
        ("/api/v1/leases/renew", "bearer abc", True),
        ("/api/v1/leases/renew", "Basic abc", False),
        ("/api/v1/leases/renew", "", False),
        ("/dashboard/", "Bearer abc", False),
    ],
)
def test_is_agent_request(path: str, authorization: str, expected: bool) -> None:
    extra = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    assert lane.is_agent_request(RequestFactory().get(path, **extra)) is expected
