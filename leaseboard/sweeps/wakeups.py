"""Wake-ups: after a commit, ask a worker to drain an outbox now rather than at the next
sweep (docs/design.md §14). A wake-up is never the record: the rows are, written in the
transaction, and the sweep drains them whatever happened to the broker.

`wake(task)` returns at once. A thread of this process publishes (the request that
committed never waits on the broker, and a dead, slow or frozen Redis cannot fail or
stall it); wake-ups of one task coalesce, and are spaced at least `min_interval_s` apart
(deferred, never dropped: a burst of grants costs the broker one message, and the last
notice of the burst is not left for the sweep). A failed publish is logged, counted
(`leaseboard_wakeups_failed_total{task}` on /metrics) and not retried: the next sweep
finds the rows due. After a failure the thread stops trying for
LEASEBOARD_WAKEUP_RETRY_AFTER_S, counting what it skips, so an outage costs a warning
now and then, not a timeout per commit. With `task_always_eager` (tests) the task runs
here and now instead.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)


class Wakeups:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}  # task name -> publish no earlier than
        self._tasks: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._broker_down_until = 0.0
        self._thread: threading.Thread | None = None
        self._busy = False
        # A forked child (gunicorn, Celery's prefork pool) has neither the thread nor, if
        # the fork caught it held, a usable lock: it starts afresh.
        os.register_at_fork(after_in_child=self._forget_thread)
        self.sent: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()

    def wake(self, task: Any, *, min_interval_s: float = 0.0) -> None:
        now = time.monotonic()
        if task.app.conf.task_always_eager:
            # Here and now; within min_interval_s of the last run it is coalesced away.
            if now < self._last.get(task.name, float("-inf")) + min_interval_s:
                self.skipped[task.name] += 1
                return
            self._last[task.name] = now
            try:
                task.apply()
            except Exception:  # a wake-up never fails its caller
                log.exception("wake-up %s failed", task.name)
            return
        with self._cond:
            at = max(now, self._last.get(task.name, 0.0) + min_interval_s)
            if self._due.get(task.name, float("inf")) <= at:
                return  # already asked for, as soon or sooner: nothing changes
            self._due[task.name] = at
            self._tasks[task.name] = task
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="leaseboard-wakeups", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def _forget_thread(self) -> None:
        self._cond = threading.Condition()
        self._thread = None
        self._busy = False

    def _run(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                while True:
                    now = time.monotonic()
                    ready = [name for name, at in self._due.items() if at <= now]
                    if ready:
                        break
                    wait = min(self._due.values(), default=now + 3600) - now
                    self._cond.wait(max(0.001, wait))
                for name in ready:
                    del self._due[name]
                    self._last[name] = now
                tasks = [self._tasks[name] for name in ready]
                self._busy = True
                skip = now < self._broker_down_until
            for task in tasks:
                self._publish(task, skip)

    def _publish(self, task: Any, skip: bool) -> None:
        if skip:
            self.skipped[task.name] += 1
            return
        try:
            task.apply_async(retry=False)
            self.sent[task.name] += 1
        except Exception as exc:
            self._broker_down_until = time.monotonic() + settings.LEASEBOARD_WAKEUP_RETRY_AFTER_S
            self.failed[task.name] += 1
            log.warning(
                "wake-up %s not sent (%s: %s); its outbox rows wait for the sweep",
                task.name,
                type(exc).__name__,
                exc,
            )
            _count_failure(task.name)

    def reset(self) -> None:
        """Forget what was due and sent (tests start each case afresh)."""
        with self._cond:
            self._due.clear()
            self._last.clear()
            self._broker_down_until = 0.0
            self.sent.clear()
            self.failed.clear()
            self.skipped.clear()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until every wake-up asked for so far, deferred ones too, is published or
        given up (tests, a clean shutdown); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._busy or self._due:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True


def _count_failure(task_name: str) -> None:
    """One row upsert per failed publish (at most one per process per retry interval)."""
    from django.db import connection

    from leaseboard.sweeps.services import metric_add

    try:
        metric_add({("wakeups_failed_total", task_name): 1})
    except Exception:  # the database may be down too; the log line stands
        log.exception("could not count the failed wake-up")
    finally:
        connection.close()  # this thread's own; it would hold a connection slot for good


wakeups = Wakeups()


def wake(task: Any, *, min_interval_s: float = 0.0) -> None:
    wakeups.wake(task, min_interval_s=min_interval_s)
