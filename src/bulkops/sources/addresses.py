"""Which network addresses a URL fetched for a user may reach: public ones only."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from bulkops.sources.base import Resolver

__all__ = ["IPAddress", "Resolver", "is_public", "parse_address", "system_resolver"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


async def system_resolver(host: str, port: int) -> list[str]:
    """The system's addresses for ``host`` (TCP), in its order of preference."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in found:
            found.append(address)
    return found


def _embedded(address: IPAddress) -> list[IPAddress]:
    """``address`` and the IPv4 addresses an IPv6 one carries (v4-mapped, 6to4, Teredo,
    NAT64): a forbidden IPv4 address must not pass dressed as IPv6."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.extend(address.teredo)
        if address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public(address: IPAddress) -> bool:
    """Whether ``address`` is a public unicast address: not loopback, private, link-local
    (cloud metadata at 169.254.169.254 included), shared, reserved, unspecified or
    multicast, whether written as IPv4 or carried in IPv6."""
    return all(
        one.is_global and not one.is_multicast and not one.is_reserved for one in _embedded(address)
    )


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (brackets and an IPv6 zone stripped), or None."""
    value = text.strip("[]")
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None
