"""Where a URL sends its requests, read the way the socket will read it (pure): one parse for the operator's
admission and for the load generator, so a host cannot mean one thing to the check and another to the
connection.

Python's socket IDNA-encodes a host that is not ASCII (full-width digits, an ideographic full stop become
"127.0.0.1"), and glibc's resolver reads many one-label hosts as IPv4 addresses (a plain number, hex, octal,
short dotted forms: "2130706433", "0x7f000001", "127.1"). Both are applied here first; what comes out is
either an address or a host name of letters, digits, hyphens and dots, and the load generator connects to
exactly that."""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

DEFAULT_PORTS = {"http": 80, "https": 443}
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")


class BadUrl(ValueError):
    """A URL that has no host a connection could be made to, or one written so that it could mean two."""


@dataclass(frozen=True)
class Destination:
    scheme: str
    host: str
    """The host as the socket will look it up: ASCII, lower case, no trailing dot; an address in its canonical
    form."""
    port: int
    path: str
    address: Address | None = None
    """The address the host is, in whatever spelling it was written (None: a name the resolver looks up)."""
    absolute: bool = False
    """Written with a trailing dot: the resolver does not complete it from a search list."""

    @property
    def connect_host(self) -> str:
        """What to hand the socket: the address, or the name (absolute when it was written so)."""
        return self.host + "." if self.absolute and self.address is None else self.host

    @property
    def authority(self) -> str:
        """host:port as an HTTP Host header or a gRPC authority says it (brackets for IPv6, no trailing dot)."""
        host = f"[{self.host}]" if isinstance(self.address, ipaddress.IPv6Address) else self.host
        return f"{host}:{self.port}"

    @property
    def labels(self) -> list[str]:
        return [] if self.address is not None else self.host.split(".")

    def url(self, host: str | None = None) -> str:
        """This destination as a URL (with another host in its place, such as a Service's cluster name)."""
        host = host or (f"[{self.host}]" if isinstance(self.address, ipaddress.IPv6Address) else self.connect_host)
        return f"{self.scheme}://{host}:{self.port}{self.path}"


# Names every resolver answers from its hosts file (and RFC 6761's .localhost), before any DNS server.
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def _address(host: str) -> Address | None:
    """The address a host is to the resolver: any spelling inet_aton accepts (glibc's getaddrinfo reads a
    numeric host with it), an IPv6 literal, or a loopback name."""
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return ipaddress.ip_address("127.0.0.1")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fx.]+", host):  # only these can spell an IPv4 address
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def destination(url: str, field: str = "url") -> Destination:
    """The URL's scheme, host, port and path, the host as the connection will resolve it. BadUrl names `field`
    and what to write instead."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        raw = parts.hostname
    except ValueError as exc:  # a port out of range or not a number, a bracket left open
        raise BadUrl(f"{field}: {url!r} is not a URL ({exc}); write it as http://host:port/path") from None
    if port == 0:
        raise BadUrl(f"{field}: {url!r} names port 0, which no server listens on; write the server's port")
    if parts.scheme not in DEFAULT_PORTS:
        raise BadUrl(f"{field}: {url!r} is not an http or https URL; write it as http://host:port/path")
    if not raw:
        raise BadUrl(f"{field}: {url!r} has no host; write it as http://host:port/path")
    absolute = raw.endswith(".") and not raw.endswith("..")
    try:
        address = ipaddress.ip_address(raw)  # an IPv6 literal (brackets already removed), or plain IPv4
    except ValueError:
        address = None
    if address is None:
        try:
            host = raw.encode("idna").decode("ascii").lower()  # what socket.getaddrinfo sends for a str host
        except UnicodeError:
            raise BadUrl(
                f"{field}: {url!r}: the host {raw!r} is not a host name (a label is empty, longer than 63 "
                "characters, or not a name once IDNA-encoded)"
            ) from None
        host = host[:-1] if absolute else host
        if not _NAME.fullmatch(host):
            raise BadUrl(
                f"{field}: {url!r}: the host {host!r} is not a host name (letters, digits, hyphens and dots) "
                "nor an IP address"
            )
        address = _address(host)
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
            raise BadUrl(f"{field}: {url!r}: an IPv6 address with a zone (%{address.scope_id}) is not a target")
        host, absolute = str(address), False
    return Destination(
        scheme=parts.scheme,
        host=host,
        port=port or DEFAULT_PORTS[parts.scheme],
        path=parts.path,
        address=address,
        absolute=absolute,
    )
