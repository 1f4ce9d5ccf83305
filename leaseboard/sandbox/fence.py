"""The sandbox's fence: the recipient guard's verifier, with the epoch check in our transaction.

PostgreSQL runs the guard's own `INSERT … ON CONFLICT … WHERE` (`recipient.guard.upsert_sql`)
on `EpochMark`'s table. SQLite runs the same conditional upsert in SQLite's dialect (the
guard's statement calls PostgreSQL's `now()`); both are in `leaseboard.core.sql`. With the
project's IMMEDIATE transactions the write lock is held from BEGIN, so the mark and the
ledger row commit together.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from leaseboard.core.sql import epoch_mark_upsert
from leaseboard.sandbox.models import EpochMark
from leaseboard_recipient import RecipientReporter, Refusal, TokenVerifier
from leaseboard_recipient.guard import GuardResult

log = logging.getLogger(__name__)

RECIPIENT_NAME = "payments-sandbox"
PAYMENTS_QUEUE = "payments"
# The sandbox's recipient credential (`manage.py create_recipient`), under DATA_DIR/demo,
# written by `manage.py demo_setup`. An agent's token would be refused: recipients are
# principals of their own.
TOKEN_FILE = "sandbox.token"


class LedgerEpochGuard:
    """Fencing-order guard on the sandbox's own table; only usable inside the caller's
    transaction."""

    table = EpochMark._meta.db_table

    def check_in(
        self, cursor: Any, work_key: str, epoch: int, *, generation: int = 0
    ) -> GuardResult:
        if not transaction.get_connection().in_atomic_block:
            raise RuntimeError("the sandbox's epoch check must run inside its transaction")
        cursor.execute(
            epoch_mark_upsert(connection.vendor, self.table), (work_key, generation, epoch)
        )
        row = cursor.fetchone()
        if row is not None:
            return GuardResult(accepted=True, generation=int(row[0]), high_water=int(row[1]))
        cursor.execute(
            f"SELECT generation, high_water FROM {self.table} WHERE work_key = %s", (work_key,)
        )
        row = cursor.fetchone()
        if row is None:
            return GuardResult(accepted=False, generation=generation, high_water=epoch + 1)
        return GuardResult(accepted=False, generation=int(row[0]), high_water=int(row[1]))

    def check_and_advance(self, work_key: str, epoch: int, *, generation: int = 0) -> GuardResult:
        raise TypeError("use check_in(cursor, …) inside the ledger transaction")


class OnCommitReporter:
    """Queues a refusal report only once the ledger row recording it has committed."""

    def report(self, refusal: Refusal) -> None:
        # robust: a report that cannot be queued is logged, never raised into a response
        # whose ledger row has committed.
        transaction.on_commit(lambda: _send_report(refusal), robust=True)


def sandbox_token() -> str | None:
    token = getattr(settings, "LEASEBOARD_SANDBOX_TOKEN", None) or os.environ.get(
        "LEASEBOARD_SANDBOX_TOKEN"
    )
    if token:
        return token
    path = settings.DATA_DIR / "demo" / TOKEN_FILE
    return path.read_text().strip() if path.exists() else None


def report_base_url() -> str:
    # Never derived from the request's Host header: that would send our token to the caller.
    url = getattr(settings, "LEASEBOARD_SANDBOX_REPORT_URL", None) or os.environ.get(
        "LEASEBOARD_SANDBOX_REPORT_URL"
    )
    return url or f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"


_lock = threading.Lock()
_reporters: dict[tuple[str, str], RecipientReporter] = {}
_verifier: TokenVerifier | None = None


def reporter() -> RecipientReporter | None:
    token = sandbox_token()
    if not token:
        log.warning("payments sandbox has no recipient credential; refusals are not reported")
        return None
    key = (report_base_url(), token)
    with _lock:
        if key not in _reporters:
            _reporters[key] = RecipientReporter(base_url=key[0], token=token, background=True)
        return _reporters[key]


def _send_report(refusal: Refusal) -> None:
    active = reporter()
    if active is not None:
        active.report(refusal)


def _jwks(_url: str) -> dict:
    # The sandbox runs in the server's process: it reads the very JWKS document the API
    # publishes at /api/v1/fencing/keys, without the HTTP hop, and verifies offline from it.
    from leaseboard.core.services.fencing import fencing_public_keys
    from leaseboard.domain import fencing

    return fencing.jwks(fencing_public_keys())


def verifier() -> TokenVerifier:
    global _verifier
    with _lock:
        if _verifier is None:
            _verifier = TokenVerifier(
                recipient=RECIPIENT_NAME,
                jwks_url="/api/v1/fencing/keys",
                fetch=_jwks,
                guard=LedgerEpochGuard(),  # type: ignore[arg-type]
                reporter=OnCommitReporter(),
                min_refresh_interval_s=5.0,
                # Effect tokens only, unless the demo is told to take lease tokens too.
                accept_lease_tokens=getattr(
                    settings, "LEASEBOARD_SANDBOX_ACCEPT_LEASE_TOKENS", False
                ),
                # A payments service: only what the `payments` queue's rules decided, so an
                # agent that admitted a payment to a laxer queue is refused (wrong_queue).
                queues=PAYMENTS_QUEUE,
            )
        return _verifier
