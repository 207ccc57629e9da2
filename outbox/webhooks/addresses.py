"""Which webhook endpoints a delivery may reach: the guard against server-side request forgery.

A webhook URL is typed by a person, so without a guard it could point the site at its own
admin, a database on the private network or a cloud metadata service. ``check_url`` refuses
URLs that are malformed or of the wrong scheme (pure, for forms and for the sender);
``resolve`` turns a host into the addresses a request may connect to, dropping those that
are not public. The sender resolves at send time and connects to an address ``resolve``
returned, not to the name again, so DNS cannot answer differently between check and connect.
"""

import ipaddress
import logging
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

# NAT64 (RFC 6052) embeds an IPv4 address that a NAT64 gateway would reach for us.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

#: Not public although Python's ``ipaddress`` (3.11) counts them global: the deprecated
#: IPv6 site-local range (RFC 3879, still routed inside some networks) and the
#: documentation ranges (RFC 5737, RFC 3849, RFC 9637), which no real endpoint has.
NOT_PUBLIC = tuple(
    ipaddress.ip_network(net)
    for net in (
        "fec0::/10",
        "2001:db8::/32",
        "3fff::/20",
        "192.0.2.0/24",
        "198.51.100.0/24",
        "203.0.113.0/24",
    )
)

#: The settings the refusals name, so an operator knows which one would allow it.
ALLOW_PRIVATE = "INSTATIC_WEBHOOK_ALLOW_PRIVATE"
ALLOW_HTTP = "INSTATIC_WEBHOOK_ALLOW_HTTP"


class AddressError(Exception):
    """A webhook's host cannot be reached; ``message`` is a sentence for people."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BlockedAddress(AddressError):
    """Every address of a webhook's host is private, loopback or otherwise not public."""


class UnresolvedHost(AddressError):
    """A webhook's host name has no address (the name does not exist or DNS failed)."""


class Target(NamedTuple):
    """The parts of a checked webhook URL the sender needs."""

    scheme: str
    host: str
    port: int
    request_target: str

    @property
    def host_header(self) -> str:
        """Return the ``Host`` header: the host (IPv6 in brackets) and a non-default port."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def check_url(url: str, *, allow_http: bool, allow_private: bool) -> str | None:
    """Return what is wrong with ``url`` as a webhook endpoint, in a sentence that says how
    to fix it, or None if nothing is.

    Only ``https://`` is accepted unless ``allow_http``; the URL must name a host, carry no
    user name or password (they would be sent to whoever answers, and belong in the secret)
    and have a port from 1 to 65535. A host written as an IP address is refused here if it
    is not public and ``allow_private`` is False; names are checked when they are resolved.
    """
    return _parse(url, allow_http=allow_http, allow_private=allow_private)[0]


def parse_url(url: str, *, allow_http: bool, allow_private: bool) -> Target:
    """Return the ``Target`` of a URL ``check_url`` accepts; raise ``ValueError`` with its
    sentence otherwise."""
    problem, target = _parse(url, allow_http=allow_http, allow_private=allow_private)
    if problem:
        raise ValueError(problem)
    return target


def _parse(url, *, allow_http, allow_private) -> tuple[str | None, Target | None]:
    if not isinstance(url, str) or not url.strip():
        return "The webhook URL is empty; enter the https:// address of the endpoint.", None
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return (
            "The webhook URL contains spaces or control characters; remove them"
            " (percent-encode any that belong in the path).",
            None,
        )
    try:
        parts = urlsplit(url)
    except ValueError:
        return "The webhook URL is not a valid URL; enter it as https://host/path.", None
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme.lower() not in schemes:
        if parts.scheme.lower() == "http":
            return (
                "The webhook URL uses http://, which sends deliveries unencrypted;"
                f" use the endpoint's https:// address (or set {ALLOW_HTTP}=1).",
                None,
            )
        wanted = " or ".join(f"{s}://" for s in schemes)
        return f"The webhook URL must start with {wanted}.", None
    if "@" in parts.netloc:
        return (
            "The webhook URL contains a user name or password; remove it from the URL"
            " (the endpoint checks the signature instead).",
            None,
        )
    host = parts.hostname
    if not host:
        return "The webhook URL has no host; enter it as https://host/path.", None
    if not host.isascii():
        try:
            # The name as DNS and the Host header know it (IDNA, "xn--" labels).
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return "The webhook URL's host is not a valid domain name; check its spelling.", None
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    if not 1 <= port <= 65535:
        return "The webhook URL's port must be a number from 1 to 65535.", None
    if not allow_private:
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None and not is_public(literal):
            return (
                f"The webhook URL points to {host}, which is not a public address;"
                f" use the endpoint's public address (or set {ALLOW_PRIVATE}=1 if it is"
                " meant to be on a private network).",
                None,
            )
    request_target = parts.path or "/"
    if parts.query:
        request_target += f"?{parts.query}"
    return None, Target(parts.scheme.lower(), host, port, request_target)


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Return True if ``address`` is a public unicast address; an IPv6 address that carries
    an IPv4 one (mapped, 6to4, NAT64) is judged by that IPv4 address, which it reaches."""
    if address.version == 6:
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in _NAT64:
            embedded = ipaddress.IPv4Address(address.packed[-4:])
        if embedded is not None:
            # The IPv4 address decides: the IPv6 ranges themselves count as reserved or private.
            return is_public(embedded)
    if any(address in net for net in NOT_PUBLIC if net.version == address.version):
        return False
    # is_global alone lets multicast through (224.0.0.0/4 and ff00::/8 count as global).
    return address.is_global and not (
        address.is_multicast
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_unspecified
        or address.is_private
    )


def resolve(
    host: str, port: int, *, allow_private: bool, getaddrinfo=socket.getaddrinfo
) -> list[str]:
    """Return the IP addresses a request to ``host``:``port`` may connect to, in the
    resolver's order and without repeats.

    Without ``allow_private`` the addresses that are not public are left out, and if none
    is left ``BlockedAddress`` is raised; a name with no address raises ``UnresolvedHost``.
    """
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise UnresolvedHost(
            f"{host} could not be resolved ({exc}); check the webhook's host name."
        )
    found = []
    for _family, _type, _proto, _canonname, sockaddr in infos:
        if sockaddr[0] not in found:
            found.append(sockaddr[0])
    if not found:
        raise UnresolvedHost(f"{host} has no address; check the webhook's host name.")
    if allow_private:
        return found
    allowed = [ip for ip in found if is_public(ipaddress.ip_address(ip))]
    if not allowed:
        raise BlockedAddress(
            f"blocked address: {host} resolves only to addresses that are not public"
            f" ({', '.join(found)}); point the webhook to a public endpoint (or set"
            f" {ALLOW_PRIVATE}=1 if it is meant to be on a private network)."
        )
    if len(allowed) < len(found):
        logger.info(
            "Webhook host %s: left out addresses that are not public: %s",
            host,
            ", ".join(ip for ip in found if ip not in allowed),
        )
    return allowed


def loopback_only(host: str, ips: list[str]) -> str | None:
    """Return why http:// to ``host`` is refused when it is allowed only to loopback (with
    DEBUG), or None if every address of ``host`` is a loopback one."""
    if ips and all(ipaddress.ip_address(ip).is_loopback for ip in ips):
        return None
    return (
        f"The webhook URL uses http:// to {host}, which is not a loopback address; with"
        " DJANGO_DEBUG plain http:// is allowed only to loopback. Use the endpoint's"
        f" https:// address (or set {ALLOW_HTTP}=1)."
    )


def refusal(
    url: str, *, allow_http: bool | str, allow_private: bool, getaddrinfo=socket.getaddrinfo
) -> str | None:
    """Return why the sender would refuse ``url`` now, naming the setting that would allow
    it, or None if it would send (a host that does not resolve is not refused here: DNS
    may answer by the time it is sent to)."""
    try:
        target = parse_url(url, allow_http=bool(allow_http), allow_private=allow_private)
    except ValueError as exc:
        return str(exc)
    try:
        ips = resolve(
            target.host, target.port, allow_private=allow_private, getaddrinfo=getaddrinfo
        )
    except BlockedAddress as exc:
        return exc.message
    except UnresolvedHost:
        return None
    if target.scheme == "http" and allow_http == "loopback":
        return loopback_only(target.host, ips)
    return None
