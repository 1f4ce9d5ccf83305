"""One outbound POST under the address policy (leaseboard.sweeps.outbound), against a real
HTTP receiver on 127.0.0.1: the body and headers arrive, the Host header is the URL's
while the connection goes to the address that was checked, a redirect is answered as its
status and not followed, and every failure is an Answer (never an exception) saying
coarsely what went wrong, permanent where retrying cannot help."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from leaseboard.domain.targets import networks_parsed
from leaseboard.sweeps.outbound import Answer, post


class Receiver(HTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: list[tuple[str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.seen.append((self.path, dict(self.headers.items()), body))
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
        else:
            self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_post_arrives_with_its_body_headers_and_the_urls_host(receiver, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = networks_parsed("127.0.0.0/8")
    port = receiver.server_address[1]
    answer = post(
        f"http://localhost:{port}/hook?x=1",
        content=b'{"kind":"test"}',
        headers={"Content-Type": "application/json", "X-Leaseboard-Signature": "s1"},
    )
    assert answer == Answer(204)
    ((path, headers, body),) = receiver.seen
    assert (path, body) == ("/hook?x=1", b'{"kind":"test"}')
    assert headers["Host"] == f"localhost:{port}"
    assert headers["X-Leaseboard-Signature"] == "s1"


def test_a_redirect_is_answered_as_its_status_and_not_followed(receiver, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = networks_parsed("127.0.0.0/8")
    assert post(f"{receiver.url}/moved", content=b"{}", headers={}) == Answer(302)
    assert [path for path, _, _ in receiver.seen] == ["/moved"]


def test_an_address_outside_the_policy_is_not_sent_and_permanently_so(receiver, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = ()
    answer = post(f"{receiver.url}/hook", content=b"{}", headers={})
    assert answer.status_code is None and answer.permanent is True
    assert answer.error.startswith("not sent: ")
    assert receiver.seen == []


def test_a_closed_port_and_an_unknown_host_are_answers_that_may_be_retried(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS = networks_parsed("127.0.0.0/8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert post(f"http://127.0.0.1:{closed}/", content=b"{}", headers={}) == Answer(
        None, "could not connect"
    )
    unknown = post("http://no-such-host.invalid/", content=b"{}", headers={})
    assert unknown == Answer(None, "not sent: the host does not resolve")
