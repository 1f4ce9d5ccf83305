"""A local webhook receiver, and one alert's webhook delivered to it: what the webhook
secret tests (test_production_settings, test_limits_findings) look at."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class _Sink(BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        self.received.append(
            (dict(self.headers), self.rfile.read(int(self.headers["Content-Length"])))
        )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass


def alert_webhook_delivered(agent: Any) -> tuple[list[tuple[dict[str, str], bytes]], Any]:
    """Point the default queue's webhooks at a local sink, open a jeopardy alert on a lease
    of a new agent, and run its webhook delivery: (what the sink received, the delivery
    row as the delivery left it)."""
    from leaseboard.core.models import Lease, Queue
    from leaseboard.core.services.alerts import lease_alert
    from leaseboard.sweeps import notifications, services
    from leaseboard.sweeps.models import NotificationDelivery
    from tests.builders import leased_item

    _Sink.received = []
    server = HTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/hook"
    try:
        Queue.objects.filter(name="default").update(notify={"webhooks": [{"url": url}]})
        executor, _ = agent()
        lease = Lease.objects.select_related("holder").get(id=leased_item(executor).id)
        alert_id = services.alerts_open(
            [lease_alert(lease, "jeopardy", "m", due_at_ms=0, now_ms=0)]
        )[0]
        # Opened with the alert, in its transaction (the alerts' outbox).
        delivery = NotificationDelivery.objects.get(
            alert_id=alert_id, channel="webhook", target=url
        )
        notifications.webhook_deliver(delivery_id=delivery.id)
    finally:
        server.shutdown()
    delivery.refresh_from_db()
    return _Sink.received, delivery
