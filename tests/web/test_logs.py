"""Console log filters (leaseboard/web/logs.py): a 4xx or a 503 is one line with its reason,
never a traceback; other records pass as they are; the access-log split by status."""

from __future__ import annotations

import logging

import pytest

from leaseboard.web.logs import ClientErrorsOneLine, ClientErrorsOnly, NoClientErrors


def _record(status: int | None, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    record = logging.LogRecord(
        "django.request", logging.WARNING, "x", 1, "%s: %s", ("Bad", "/p"), exc_info
    )
    if status is not None:
        record.status_code = status
    return record


@pytest.mark.parametrize("status", [400, 403, 429, 503])
def test_a_refused_or_unavailable_request_is_one_line_with_its_reason(status: int) -> None:
    record = _record(status, ValueError("epoch 3 is stale"))
    assert ClientErrorsOneLine().filter(record)
    assert record.exc_info is None and record.getMessage() == "Bad: /p: epoch 3 is stale"


@pytest.mark.parametrize("status", [500, None])
def test_a_server_error_keeps_its_traceback(status: int | None) -> None:
    record = _record(status, RuntimeError("a bug"))
    assert ClientErrorsOneLine().filter(record)
    assert record.exc_info is not None and record.getMessage() == "Bad: /p"


def test_the_access_log_split_by_status() -> None:
    for status, client_error in ((404, True), (500, False), (200, False), (None, False)):
        record = _record(status)
        assert ClientErrorsOnly().filter(record) is client_error
        assert NoClientErrors().filter(record) is not client_error
