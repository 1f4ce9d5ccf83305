"""The deploy checks that read MIDDLEWARE through the API lane's wrappers."""

from __future__ import annotations

from django.conf import settings

from leaseboard.web.checks import CSRF, XFRAME, browser_protections, middleware_unwrapped


def test_the_lane_wrappers_run_djangos_csrf_and_clickjacking_middleware():
    running = middleware_unwrapped()
    assert CSRF in running and XFRAME in running
    assert browser_protections() == []


def test_without_the_csrf_or_xframe_wrapper_the_deploy_check_warns(settings):
    settings.MIDDLEWARE = [
        path
        for path in settings.MIDDLEWARE
        if path
        not in (
            "leaseboard.api.lane.CsrfViewMiddleware",
            "leaseboard.api.lane.XFrameOptionsMiddleware",
        )
    ]
    assert sorted(m.id for m in browser_protections()) == ["leaseboard.W002", "leaseboard.W003"]


def test_djangos_own_path_counts_as_well(settings):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, CSRF]
    assert CSRF in middleware_unwrapped()


def test_djangos_two_path_checks_are_silenced_in_favour_of_these():
    assert {"security.W002", "security.W003"} <= set(settings.SILENCED_SYSTEM_CHECKS)
