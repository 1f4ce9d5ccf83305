"""What a person reading the console sees: a refused request is one line with its reason
(no traceback), and no line twice (Django's loggers do not also reach the root logger)."""

from __future__ import annotations

import contextlib
import io
import logging.config

import pytest
from django.conf import settings
from django.test import Client

from tests.builders import make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_passwords")]


@pytest.fixture
def console():
    stream = io.StringIO()
    with contextlib.redirect_stderr(stream):
        logging.config.dictConfig(settings.LOGGING)  # the handlers write to `stream`
    yield stream
    logging.config.dictConfig(settings.LOGGING)


def test_a_refused_request_is_one_line_with_its_reason_and_nothing_twice(console):
    client = Client(raise_request_exception=False)
    client.force_login(make_user("olga", "operator"))
    assert client.get("/settings/").status_code == 403
    assert client.get("/no-such-page").status_code == 404
    lines = console.getvalue().splitlines()
    assert lines == [
        "Forbidden (Permission denied): /settings/: needs the role admin",
        "Not Found: /no-such-page",
    ]
