"""Log records for people reading a console: a refused request (4xx) is one line — the
refusal is the expected answer, not a fault, so its traceback says nothing — with the
reason it was refused appended; so is a 503 (the database not answering: during an outage
one line per request, not one traceback each); with an access log, refused requests are
lines there and the console keeps what needs a person (5xx). Wired in settings.LOGGING."""

from __future__ import annotations

import logging


class ClientErrorsOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        one_line = isinstance(status, int) and (400 <= status < 500 or status == 503)
        if one_line and record.exc_info:
            exc = record.exc_info[1]
            reason = str(exc) if exc is not None else ""
            if reason:
                record.msg = f"{record.getMessage()}: {reason}"
                record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _client_error(record: logging.LogRecord) -> bool:
    status = getattr(record, "status_code", None)
    return isinstance(status, int) and 400 <= status < 500


class ClientErrorsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _client_error(record)


class NoClientErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _client_error(record)
