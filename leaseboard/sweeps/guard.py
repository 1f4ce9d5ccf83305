"""Worker start-up guard (docs/design.md §11): refuse settings that could lose or loop sweeps.

- With a broker that redelivers unacked messages after a visibility timeout (Redis, SQS),
  the timeout must exceed every task's hard time limit, or a task still running is
  delivered again to another worker.
- Every task needs a hard time limit (`task_time_limit`), or the comparison is meaningless.
- `task_reject_on_worker_lost` with late acks redelivers a task that kills its worker,
  forever: a poison sweep would loop.
- Notification deliveries must ack late, or a worker killed mid-delivery loses them.
- The consumer must be leaseboard.sweeps.consumer's: Celery 5.7's own exits on a broker
  connection lost while it holds unacknowledged messages.
"""

from __future__ import annotations

from typing import Any

VISIBILITY_BROKERS = ("redis", "rediss", "sqs", "sentinel")
MUST_ACK_LATE = ("leaseboard.sweeps.tasks.notify_alert", "leaseboard.sweeps.tasks.deliver_webhook")
CONSUMER = "leaseboard.sweeps.consumer:Consumer"


def worker_config_problems(app: Any) -> list[str]:
    """Every problem found, each naming the setting to change; empty when safe."""
    app.loader.import_default_modules()  # register autodiscovered tasks before checking
    conf = app.conf
    problems: list[str] = []
    broker = str(conf.broker_url or "")
    scheme = broker.split("://", 1)[0].split("+", 1)[0].lower()
    visibility = (conf.broker_transport_options or {}).get("visibility_timeout")
    if scheme in VISIBILITY_BROKERS and visibility is None:
        visibility = 3600  # kombu's Redis default
    consumer = str(conf.worker_consumer or "")
    if consumer != CONSUMER:
        problems.append(
            f"CELERY_WORKER_CONSUMER (worker_consumer) is {consumer!r}: use {CONSUMER!r}, or "
            "a broker restart with unacknowledged messages stops the worker (celery 5.7.0)"
        )
    default_limit = conf.task_time_limit
    for name, task in sorted(app.tasks.items()):
        if not name.startswith("leaseboard."):
            continue
        limit = getattr(task, "time_limit", None) or default_limit
        if not limit:
            problems.append(
                f"CELERY_TASK_TIME_LIMIT (task_time_limit) is unset for {name}: every task "
                "needs a hard time limit below the broker visibility timeout"
            )
            continue
        if visibility is not None and float(visibility) <= float(limit):
            problems.append(
                f"CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'] "
                f"(LEASEBOARD_BROKER_VISIBILITY_TIMEOUT_S) = {visibility} s must exceed the "
                f"hard time limit of {name} ({limit} s), or the broker redelivers a running task"
            )
        acks_late = task.acks_late if task.acks_late is not None else conf.task_acks_late
        reject = (
            task.reject_on_worker_lost
            if getattr(task, "reject_on_worker_lost", None) is not None
            else conf.task_reject_on_worker_lost
        )
        if acks_late and reject:
            problems.append(
                f"CELERY_TASK_REJECT_ON_WORKER_LOST (task_reject_on_worker_lost) with late acks "
                f"on {name}: a task that kills its worker would be redelivered forever"
            )
        if name in MUST_ACK_LATE and not acks_late:
            problems.append(
                f"acks_late is off for {name}: a worker lost mid-delivery would drop the "
                "notification (CELERY_TASK_ACKS_LATE or the task's acks_late)"
            )
    return problems
