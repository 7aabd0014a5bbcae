"""The allow list of ``sourceUrl`` prefixes (``BULKOPS_SOURCE_URL_ALLOW``) and the parsing
of a URL against it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from bulkops.errors import BadRequest
from bulkops.sources.addresses import IPAddress, parse_address

_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_URL_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed http(s) URL: what is connected to and what is asked for."""

    url: str
    scheme: str
    host: str  # lowercased; an IPv6 literal without brackets
    port: int
    path: str  # as written, never empty ("/" at least), query included
    address: IPAddress | None  # the host, when it is an IP literal

    @property
    def authority(self) -> str:
        """The ``Host`` header: the host (IPv6 in brackets) and a port other than the
        scheme's default."""
        host = (
            f"[{self.host}]"
            if self.address is not None and self.address.version == 6
            else self.host
        )
        return host if _DEFAULT_PORTS[self.scheme] == self.port else f"{host}:{self.port}"

    @property
    def file_name(self) -> str | None:
        """The URL path's last segment, percent-decoded (None when empty)."""
        last = self.path.split("?", 1)[0].rsplit("/", 1)[-1]
        return unquote(last) or None


def parse_target(url: str, *, what: str = "sourceUrl") -> Target:
    """``url`` as an http(s) target.

    Raises:
        BadRequest: not an absolute http(s) URL with a host; user info, a fragment,
            whitespace or control characters, ``.``/``..`` path segments.
    """
    if len(url) > MAX_URL_LENGTH or not url.isascii() or not url.isprintable() or " " in url:
        raise BadRequest(f"{what} must be a URL of printable ASCII without spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadRequest(f"{what} is not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise BadRequest(f"{what} must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise BadRequest(f"{what} must not carry user information")
    if parts.fragment or "#" in url:
        raise BadRequest(f"{what} must not have a fragment")
    segments = unquote(parts.path).split("/")
    if any(segment in (".", "..") for segment in segments) or "\\" in unquote(parts.path):
        raise BadRequest(f"{what} must not contain '.' or '..' path segments")
    host = parts.hostname.lower().rstrip(".")
    address = parse_address(host)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(
        url=url,
        scheme=scheme,
        host=host if address is None else str(address),
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        path=path,
        address=address,
    )


class AllowList:
    """The prefixes an http(s) ``sourceUrl`` must start with.

    A URL matches a prefix when scheme, host and port are the prefix's and its path (with
    the query) starts with the prefix's path: ``https://files.example.com`` does not let
    ``https://files.example.com.evil.net/`` or ``https://files.example.com@evil.net/`` in.

    Raises:
        ValueError: a prefix is not an http(s) URL with a host (at start).
    """

    def __init__(self, prefixes: list[str]) -> None:
        self._prefixes: list[Target] = []
        for prefix in prefixes:
            try:
                self._prefixes.append(
                    parse_target(prefix, what="A BULKOPS_SOURCE_URL_ALLOW prefix")
                )
            except BadRequest as exc:
                raise ValueError(f"{exc.message}: {prefix!r}") from None

    def __bool__(self) -> bool:
        return bool(self._prefixes)

    def match(self, target: Target) -> Target | None:
        """The first prefix ``target`` starts with, or None."""
        for prefix in self._prefixes:
            if (
                prefix.scheme == target.scheme
                and prefix.host == target.host
                and prefix.port == target.port
                and target.path.startswith(prefix.path)
            ):
                return prefix
        return None
