"""Which addresses a sourceUrl may reach, and how a URL matches the allow list."""

from __future__ import annotations

import ipaddress

import pytest

from bulkops.errors import BadRequest
from bulkops.sources.addresses import is_public
from bulkops.sources.allow import AllowList, parse_target


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.0.9",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.251",
        "240.0.0.1",
        "192.0.2.1",
        "::",
        "::1",
        "fe80::1",
        "fd12:3456::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "2002:a9fe:a9fe::1",  # 6to4 around 169.254.169.254
        "64:ff9b::7f00:1",  # NAT64 around 127.0.0.1
        "2001:db8::1",
    ],
)
def test_inside_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_are(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


def test_a_url_matches_a_prefix_by_scheme_host_port_and_path() -> None:
    allow = AllowList(["https://files.example.com/exports/", "http://[2001:db8::5]:8080/"])
    good = parse_target("https://FILES.example.com./exports/2026/a.csv?x=1")
    assert allow.match(good) is not None
    assert good.file_name == "a.csv" and good.authority == "files.example.com"
    assert allow.match(parse_target("http://[2001:0db8::0005]:8080/a.csv")) is not None
    for url in (
        "https://files.example.com/other/a.csv",
        "http://files.example.com/exports/a.csv",
        "https://files.example.com:8443/exports/a.csv",
        "https://files.example.com.evil.net/exports/a.csv",
        "https://evil.net/exports/a.csv",
    ):
        assert allow.match(parse_target(url)) is None, url


@pytest.mark.parametrize(
    "url",
    [
        "https://user@files.example.com/exports/a.csv",
        "https://files.example.com/exports/../secret",
        "https://files.example.com/exports/%2E%2E/secret",
        "https://files.example.com/exports/a b.csv",
        "https://files.example.com/exports/ä.csv",
        "https:///exports/a.csv",
        "file:///etc/passwd",
        "https://files.example.com:99999/a.csv",
    ],
)
def test_malformed_or_tricky_urls_are_refused(url: str) -> None:
    with pytest.raises(BadRequest):
        parse_target(url)
