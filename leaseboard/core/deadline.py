"""A request's deadline on the database, enforced from this side (docs/design.md §14).

PostgreSQL's statement and lock timeouts are enforced by the server: a server that is
frozen (SIGSTOP, a hung host, a stalled disk) enforces nothing, and the kernel keeps
acknowledging TCP, so keepalives and `tcp_user_timeout` never fire either (measured:
docs/deployment.md, "When parts fail"). psycopg has no per-statement client timeout. So
one watchdog thread per process holds every running request's deadline and, when one
passes, shuts down that request's database socket: the wait in psycopg returns at once
with an OperationalError, which the API answers as 503 `unavailable`. The connection is
then discarded (`leave`). A new connection is bounded by `connect_timeout` instead.

The socket is shut down through a duplicate of its descriptor, checked to still be the
connection's own after duplicating, so a descriptor the request thread closed and the
process reused meanwhile is never touched. A deadline that passes while the request is
still connecting (no socket to cut yet) refuses the connection once it is made
(`refuse_past_deadline`, on Django's `connection_created`): a server that thaws just
then must not let the request go on past the agent's own timeout.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# With nothing running the watchdog looks again this often: a request's deadline is never
# nearer than this, so entering one never has to wake the thread (no context switch per
# request on the hot paths).
IDLE_S = 1.0


@dataclass(eq=False)
class Deadline:
    at: float
    db: Any  # the request thread's DatabaseWrapper (connections are per thread)
    fired: bool = False  # the deadline passed while the request ran
    # What the request was doing when the deadline cut it: "commit" when the outermost
    # transaction was being committed (its outcome is then unknown), else "statement".
    phase: str = ""
    broken: bool = False  # the connection failed under it (set by the error handlers)


_running_here = threading.local()  # the deadline of the request this thread runs


def refuse_past_deadline(sender: object = None, connection: Any = None, **_: object) -> None:
    """Receiver of `connection_created`: a connection opened after its request's deadline
    passed is closed at once, and the request fails as if it had been cut."""
    deadline = getattr(_running_here, "deadline", None)
    if deadline is None or not deadline.fired or connection is None:
        return
    from django.db import OperationalError

    connection.close()
    raise OperationalError("the request's database deadline passed while it connected")


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running: set[Deadline] = set()
        self._wake_at = 0.0
        self._thread: threading.Thread | None = None
        self.cuts = 0
        # A forked child (a gunicorn worker) has neither the thread nor, if the fork caught
        # it held, a usable lock: it starts afresh.
        os.register_at_fork(after_in_child=self._forget_thread)

    def enter(self, seconds: float, db: Any) -> Deadline:
        deadline = Deadline(at=time.monotonic() + seconds, db=db)
        _running_here.deadline = deadline
        with self._cond:
            self._running.add(deadline)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="leaseboard-db-deadline", daemon=True
                )
                self._thread.start()
            if deadline.at < self._wake_at:  # rare: a deadline shorter than IDLE_S
                self._cond.notify()
        return deadline

    def leave(self, deadline: Deadline) -> None:
        if getattr(_running_here, "deadline", None) is deadline:
            _running_here.deadline = None
        with self._cond:
            self._running.discard(deadline)

    def _forget_thread(self) -> None:
        self._cond = threading.Condition()
        self._running = set()
        self._wake_at = 0.0
        self._thread = None

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [d for d in self._running if d.at <= now and not d.fired]
                for d in due:
                    # Under the lock: the request cannot leave (and its thread start the
                    # next request on the same connection) while its socket is cut.
                    d.fired = True
                    self._cut(d)
                pending = [d.at for d in self._running if not d.fired]
                self._wake_at = min(pending, default=now + IDLE_S)
                self._cond.wait(max(0.0, self._wake_at - time.monotonic()))

    def _cut(self, deadline: Deadline) -> None:
        db = deadline.db
        raw: Any = getattr(db, "connection", None)
        pgconn = getattr(raw, "pgconn", None)
        if raw is None or pgconn is None:
            return
        # Between the outermost transaction's end and its COMMIT's answer, autocommit is
        # still off and no atomic block is open: a cut there leaves the outcome unknown.
        committing = not getattr(db, "autocommit", True) and not getattr(
            db, "in_atomic_block", False
        )
        deadline.phase = "commit" if committing else "statement"
        try:
            fd = pgconn.socket
            dup = os.dup(fd)
        except Exception:  # closed meanwhile: nothing to cut
            return
        try:
            if raw.closed or pgconn.socket != fd:
                return  # the descriptor was closed (and maybe reused) before the dup
            sock = socket.socket(fileno=dup)
            dup = -1
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()
            self.cuts += 1
            log.warning("database deadline passed during a %s: connection cut", deadline.phase)
        except OSError as exc:  # the socket went away meanwhile: nothing left to cut
            log.debug("deadline cut skipped: %s", exc)
        finally:
            if dup >= 0:
                os.close(dup)


watchdog = Watchdog()
