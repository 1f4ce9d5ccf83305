"""Broker reachability for /healthz (registered in SweepsConfig.ready)."""

from __future__ import annotations


def broker_check() -> tuple[str, bool, str]:
    from leaseboard.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            return "broker", True, conn.transport_cls if isinstance(conn.transport_cls, str) else ""
    except Exception as exc:  # unreachable broker = unhealthy; say why
        return "broker", False, type(exc).__name__
