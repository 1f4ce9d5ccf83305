"""Where Leaseboard may send a notification: webhook URLs and e-mail addresses checked when
they are saved, and the outbound address policy checked again when they are sent.

A webhook is a request the server makes on an admin's behalf, so a URL is a way to reach
whatever the server can reach (SSRF): Redis, PostgreSQL, the app itself on 127.0.0.1, a
cloud metadata service on 169.254.169.254. Only global unicast addresses are allowed,
unless an allow-list (LEASEBOARD_WEBHOOK_ALLOW_NETWORKS) names the network. Pure: the
caller resolves names and passes the addresses in.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

URL_MAX = 500
EMAIL_MAX = 254
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f-\x9f]")
_HOST_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(ValueError):
    """A target that cannot be used: the message says why, without saying what answered."""


def networks_parsed(raw: str) -> tuple[Network, ...]:
    """`127.0.0.0/8, ::1/128` -> networks; raises ValueError naming the bad entry."""
    out = []
    for entry in (e.strip() for e in raw.split(",")):
        if entry:
            try:
                out.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"{entry!r} is not a network (e.g. 10.0.0.0/8)") from None
    return tuple(out)


def address_refusal(address: Address, allowed: Sequence[Network]) -> str | None:
    """Why the policy refuses to connect to `address`, or None."""
    if any(address in net for net in allowed if net.version == address.version):
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        return address_refusal(mapped, allowed)
    if address.is_global and not address.is_multicast:
        return None
    return (
        "the address is not a public one (loopback, private, link-local or reserved); "
        "allow its network in LEASEBOARD_WEBHOOK_ALLOW_NETWORKS if it is meant"
    )


def addresses_refusal(addresses: Iterable[str], allowed: Sequence[Network]) -> str | None:
    """Every address a name resolves to must be allowed: a name with one public and one
    private address would otherwise pick one per connection."""
    found = False
    for text in addresses:
        found = True
        try:
            address = ipaddress.ip_address(text.split("%", 1)[0])
        except ValueError:
            return "the host resolved to something that is not an address"
        refusal = address_refusal(address, allowed)
        if refusal:
            return refusal
    return None if found else "the host does not resolve"


def webhook_url_problem(url: str, allowed: Sequence[Network]) -> str | None:
    """Why `url` cannot be a webhook, or None: http(s), a host, a valid port, no
    credentials, no control characters or spaces, at most URL_MAX characters; a literal
    address (or localhost) must pass the address policy here already."""
    if not url:
        return "a webhook URL is http(s)://host/…"
    if len(url) > URL_MAX:
        return f"a webhook URL is at most {URL_MAX} characters"
    if _CONTROL_OR_SPACE.search(url):
        return "a webhook URL has no spaces or control characters (encode them: %20)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme not in ("http", "https"):
        return "a webhook URL is http:// or https://"
    host = parts.hostname or ""
    if not host:
        return "a webhook URL names a host"
    if parts.username is not None or parts.password is not None:
        return "a webhook URL carries no user or password (they would be logged): use a secret"
    if port == 0:
        return "port 0 is no port"
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        return address_refusal(literal, allowed)
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return "the host is not a valid name"
    labels = ascii_host.rstrip(".").split(".")
    if not all(_HOST_LABEL.match(label) for label in labels):
        return "the host is not a valid name"
    if labels[-1] == "localhost" or labels[-1].isdigit():
        return address_refusal(ipaddress.ip_address("127.0.0.1"), allowed)
    return None


def email_problem(address: str) -> str | None:
    """What no address may carry whatever validator approves it (a header line break)."""
    if not address or len(address) > EMAIL_MAX:
        return f"an e-mail address is 1 to {EMAIL_MAX} characters"
    if _CONTROL_OR_SPACE.search(address):
        return "an e-mail address has no spaces or control characters"
    return None
