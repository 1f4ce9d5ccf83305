"""The Celery app: Redis broker in production, kombu's filesystem transport embedded.

Configuration is read from Django settings (the `CELERY_*` names, in
leaseboard/settings/worker.py). The start-up guard in leaseboard/sweeps/guard.py
refuses to run a worker whose broker or ack settings could lose or loop sweeps.
"""

from __future__ import annotations

import os

from celery import Celery, signals
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaseboard.settings")
# filesystem:// is served by our atomic-write subclass (see leaseboard/sweeps/fs_transport.py).
TRANSPORT_ALIASES["filesystem"] = "leaseboard.sweeps.fs_transport:Transport"

app = Celery("leaseboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_process_init.connect
@signals.worker_init.connect
def _traced_worker(sender=None, **kwargs):  # type: ignore[no-untyped-def]
    # Celery's instrumentation in each worker process (a prefork child included); off
    # unless OTEL_* variables configure it. Once per process (telemetry_setup says so).
    from leaseboard.telemetry import telemetry_setup

    telemetry_setup()


@signals.worker_init.connect
def _refuse_unsafe_worker(sender=None, **kwargs):  # type: ignore[no-untyped-def]
    from leaseboard.sweeps.guard import worker_config_problems

    problems = worker_config_problems(app)
    if problems:
        # SystemExit passes through Celery's signal dispatcher, which swallows Exceptions.
        raise SystemExit("leaseboard: refusing to start the worker:\n  " + "\n  ".join(problems))
