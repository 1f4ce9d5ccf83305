"""Fixtures for the sweep tests."""

from __future__ import annotations

import pytest

from leaseboard.celery import app as celery_app


@pytest.fixture
def celery_conf():
    """Override Celery settings for one test: celery_conf(key=value, ...)."""
    saved: dict = {}

    def override(**values):  # type: ignore[no-untyped-def]
        for key, value in values.items():
            saved.setdefault(key, celery_app.conf[key])
            celery_app.conf[key] = value

    yield override
    for key, value in saved.items():
        celery_app.conf[key] = value
