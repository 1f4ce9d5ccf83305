"""The worker's broker consumer: Celery's own, made to survive losing a Redis broker while
it holds unacknowledged messages (CELERY_WORKER_CONSUMER points here).

Celery 5.7.0 (celery/celery#10242) closes the broken connection in
`on_connection_error_after_connected` right after `connection.collect()`, which has
already detached the transport (`transport.client = None`). Closing the default channel
again then tries to restore its unacknowledged messages (any `acks_late` task or ETA
retry the worker holds), needs the transport's client for the Redis address, and raises
`AttributeError: 'NoneType' object has no attribute 'hostname'`; that is no connection
error, so the worker stops with "Unrecoverable error". Celery 5.6.3 does not close there
and survives. Here the close runs as in 5.7.0 (its sockets are released before the
restore step) and only that AttributeError is tolerated: the messages it could not
restore are still in the broker's unacked set, which redelivers them after the visibility
timeout; what they were for is in the database's outboxes, which the sweep drains.

It also reconnects sooner: kombu's default backoff grows by 2 s up to 30 s between tries,
so after an outage of a minute sweeps would resume up to half a minute after Redis came
back; here the tries are at most RECONNECT["interval_max"] apart (and never given up on:
CELERY_BROKER_CONNECTION_MAX_RETRIES is None).

No Django import: the worker loads this before Django is set up.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

log = logging.getLogger(__name__)

RECONNECT = {"interval_start": 0.5, "interval_step": 0.5, "interval_max": 2.0}


def _close_tolerating_detached_transport(connection: Any) -> Callable[[], None]:
    close = connection.close

    def close_detached() -> None:
        detached = getattr(connection, "_transport", None) is None
        try:
            close()
        except AttributeError:
            if not detached:
                raise
            # The channel's unacked messages could not be restored through a transport
            # collect() released: they wait in the broker for the visibility timeout.
            log.warning(
                "broker connection lost with unacknowledged messages; they are left to the "
                "broker's visibility timeout (the database outboxes hold their work)"
            )

    return close_detached


class Consumer(CeleryConsumer):  # type: ignore[misc]
    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(conn.ensure_connection, **RECONNECT)
        return super().ensure_connected(conn)

    def on_connection_error_after_connected(self, exc: BaseException) -> None:
        connection = self.connection
        if connection is not None and "close" not in vars(connection):
            connection.close = _close_tolerating_detached_transport(connection)
        super().on_connection_error_after_connected(exc)
