"""Where a webhook may go: the URL's form, and the addresses its host resolves to.

An endpoint must not become a way into the internal network: unless the operator allows
private addresses, every address the host resolves to must be public (``is_global``), and
the request connects to the address checked (see :mod:`outbox.webhooks.client`), so a name
cannot resolve one way for the check and another for the connection.
"""

import ipaddress
import socket
from urllib.parse import urlsplit


class BlockedAddress(Exception):
    """The endpoint's host has no address a webhook may reach; the message says why."""


def check_url(url: str, *, allow_http: bool, allow_private: bool) -> str | None:
    """Return what is wrong with ``url`` as a webhook endpoint (a sentence), or None.

    ``allow_private`` only matters for literal addresses here; names are checked when
    resolved, at every attempt.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc}); use e.g. https://hooks.example.com/instatic."
    if parts.scheme not in ("https", "http") or (parts.scheme == "http" and not allow_http):
        allowed = "https:// (or http:// where allowed)" if not allow_http else "https:// or http://"
        return f"the address must start with {allowed}; plain http is off unless allowed."
    if not parts.hostname:
        return "the address has no host; use e.g. https://hooks.example.com/instatic."
    if parts.username or parts.password:
        return "the address must not carry a user name or password; use the secret instead."
    if port is not None and not 0 < port < 65536:
        return f"port {port} is not a port (1 to 65535)."
    try:
        literal = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return None
    if not allow_private and not is_public(literal):
        return (
            f"{literal} is not a public address; webhooks may reach private addresses only "
            "with INSTATIC_WEBHOOK_ALLOW_PRIVATE on."
        )
    return None


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Return True for an address on the public internet (an IPv4-mapped one by its IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def resolve(host: str, port: int, *, allow_private: bool, getaddrinfo=socket.getaddrinfo):
    """Return the addresses a request to ``host`` may connect to, in resolver order.

    Raises :class:`BlockedAddress` when there is none: the name does not resolve, or (without
    ``allow_private``) it resolves only to addresses that are not public.
    """
    try:
        infos = getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise BlockedAddress(f"{host} does not resolve ({exc})") from None
    found = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        if (allow_private or is_public(address)) and str(address) not in found:
            found.append(str(address))
    if not found:
        raise BlockedAddress(
            f"{host} resolves only to addresses that are not public; webhooks may reach them "
            "only with INSTATIC_WEBHOOK_ALLOW_PRIVATE on"
        )
    return found
