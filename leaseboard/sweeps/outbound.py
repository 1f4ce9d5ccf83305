"""One outbound HTTP POST to a configured target, under the outbound address policy
(leaseboard.domain.targets): the URL is checked again, its host resolved, every address
checked, and the request sent to the address that was checked (so a name that resolves
elsewhere a moment later, DNS rebinding, cannot move it). No redirects are followed, no
proxy from the environment is used, and what went wrong is recorded coarsely (could not
connect, timed out, HTTP status): the delivery log must not tell an admin which service
answers on which internal port. Never raises: a target's failure stays its own.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from leaseboard.domain.targets import addresses_refusal, webhook_url_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    error: str = ""
    permanent: bool = False  # retrying cannot help (refused by policy, not a URL)


def _resolved(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def post(url: str, *, content: bytes, headers: dict[str, str]) -> Answer:
    allowed = settings.LEASEBOARD_WEBHOOK_ALLOW_NETWORKS
    problem = webhook_url_problem(url, allowed)
    if problem:
        return Answer(None, f"not sent: {problem}"[:500], permanent=True)
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = _resolved(host, port)
    except (OSError, UnicodeError):
        return Answer(None, "not sent: the host does not resolve")
    refusal = addresses_refusal(addresses, allowed)
    if refusal:
        return Answer(None, f"not sent: {refusal}"[:500], permanent=True)
    pinned = httpx.URL(url).copy_with(host=addresses[0])
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    try:
        with httpx.Client(
            trust_env=False,
            follow_redirects=False,
            timeout=settings.LEASEBOARD_WEBHOOK_TIMEOUT_S,
        ) as client:
            response = client.post(
                pinned,
                content=content,
                headers={**headers, "Host": parts.netloc},
                extensions=extensions,
            )
    except httpx.TimeoutException:
        return Answer(None, "timed out")
    except httpx.ConnectError:
        return Answer(None, "could not connect")
    except Exception as exc:  # a protocol error, a TLS failure, anything: this target's own
        log.info("webhook POST to %s failed: %s: %s", host, type(exc).__name__, exc)
        return Answer(None, "the request failed (no HTTP answer)")
    return Answer(response.status_code)
