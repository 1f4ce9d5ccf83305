"""Where notifications may go (leaseboard/domain/targets.py), pure: webhook URLs and e-mail
addresses checked when saved, and the address policy (public unicast only, unless a
network is allowed) for every address a host resolves to."""

from __future__ import annotations

import ipaddress

import pytest

from leaseboard.domain.targets import (
    URL_MAX,
    address_refusal,
    addresses_refusal,
    email_problem,
    networks_parsed,
    webhook_url_problem,
)

LOOPBACK = networks_parsed("127.0.0.0/8, ::1/128")


def test_networks_parsed_reads_a_comma_list_and_names_a_bad_entry() -> None:
    assert networks_parsed(" 10.0.0.0/8 ,, ::1/128 ") == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    assert networks_parsed("10.1.2.3/8") == (ipaddress.ip_network("10.0.0.0/8"),)
    with pytest.raises(ValueError, match="'nope' is not a network"):
        networks_parsed("10.0.0.0/8, nope")


@pytest.mark.parametrize(
    ("address", "allowed", "refused"),
    [
        ("93.184.216.34", (), False),
        ("127.0.0.1", (), True),
        ("10.1.2.3", (), True),
        ("169.254.169.254", (), True),  # a cloud metadata service
        ("224.0.0.1", (), True),  # multicast
        ("::ffff:127.0.0.1", (), True),  # loopback written as IPv6
        ("::ffff:93.184.216.34", (), False),
        ("127.0.0.1", LOOPBACK, False),
        ("::1", LOOPBACK, False),
        ("10.1.2.3", LOOPBACK, True),
    ],
)
def test_address_refusal(address: str, allowed: tuple, refused: bool) -> None:
    assert (address_refusal(ipaddress.ip_address(address), allowed) is not None) is refused


def test_every_address_of_a_name_must_be_allowed() -> None:
    assert addresses_refusal(["93.184.216.34", "2606:2800:220:1::1"], ()) is None
    assert "not a public one" in (addresses_refusal(["93.184.216.34", "10.0.0.1"], ()) or "")
    assert addresses_refusal([], ()) == "the host does not resolve"
    assert addresses_refusal(["fe80::1%eth0"], ()) is not None  # scoped link-local
    assert "not an address" in (addresses_refusal(["nonsense"], ()) or "")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://hooks.example.com/leaseboard", None),
        ("http://93.184.216.34:8080/x", None),
        ("", "http(s)://host"),
        ("https://example.com/" + "a" * URL_MAX, f"at most {URL_MAX}"),
        ("https://example.com/a b", "no spaces or control characters"),
        ("ftp://example.com/", "http:// or https://"),
        ("https:///path", "names a host"),
        ("https://user:pw@example.com/", "no user or password"),
        ("https://example.com:0/", "port 0"),
        ("https://example.com:99999/", "not a URL"),
        ("http://127.0.0.1/", "not a public one"),
        ("http://localhost:8000/", "not a public one"),
        ("http://-bad-.example/", "not a valid name"),
        ("http://10.0.0.1/", "not a public one"),
    ],
)
def test_webhook_url_problem(url: str, problem: str | None) -> None:
    got = webhook_url_problem(url, ())
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got, got


def test_an_allowed_network_lets_a_literal_address_or_localhost_through() -> None:
    assert webhook_url_problem("http://127.0.0.1:9000/hook", LOOPBACK) is None
    assert webhook_url_problem("http://localhost:9000/hook", LOOPBACK) is None


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("ops@example.com", True),
        ("", False),
        ("a" * 255, False),
        ("ops@example.com\r\nBcc: x", False),
    ],
)
def test_email_problem(address: str, ok: bool) -> None:
    assert (email_problem(address) is None) is ok
