"""One attempt at delivering a webhook: POST the body to the endpoint and report what happened.

The attempt connects to an address the guard (``addresses``) checked at send time, never to
the name again, while the request carries the original ``Host`` header and, for https, the
TLS handshake sends the host name (SNI) and checks the certificate against it with the
system's CA store. Redirects are not followed: a redirect could lead anywhere, past the guard.
Every wait is bounded (connect, each read) and so is what is read of the answer; the whole
attempt, from connect to the last byte of the answer, ends at a hard deadline
(:mod:`outbox.webhooks.deadlines`), however slowly the endpoint sends. Network problems are
reported in the ``Attempt``, never raised.
"""

import logging
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import urllib3
import urllib3.connection
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from outbox.webhooks import deadlines
from outbox.webhooks.addresses import (
    AddressError,
    BlockedAddress,
    loopback_only,
    parse_url,
    resolve,
)

logger = logging.getLogger(__name__)

#: At most this much of an answer is read; the rest is left unread and the connection closed.
MAX_READ = 64 * 1024
#: This much of what was read is kept in the attempt, for people to see what the endpoint said.
HEAD_SIZE = 512
_CHUNK = 8 * 1024
#: Pools kept for reuse of connections, keyed by (scheme, ip, port, host); the least recently
#: used is closed beyond this many.
MAX_POOLS = 32


@dataclass(frozen=True)
class Timeouts:
    """How long an attempt waits, in seconds: to connect, for each read, and in all (the
    hard deadline, from connect to the answer's last byte)."""

    connect: float = 3.0
    read: float = 10.0
    total: float = 15.0


DEFAULT_TIMEOUTS = Timeouts()


@dataclass(frozen=True)
class Attempt:
    """What one delivery attempt found: ``ok`` for a 2xx answer, the status if there was an
    answer, the first bytes of it, a one-line ``error`` for people when not ok, and how long
    the attempt took."""

    ok: bool
    status_code: int | None
    response_head: str
    error: str
    duration: float
    #: The answer's ``Retry-After`` header, as sent (429 and 503 answers say when to retry).
    retry_after: str = ""
    #: True when the address rules refused the endpoint: trying again will not help.
    refused: bool = False


class _Connection(urllib3.connection.HTTPConnection):
    """An HTTP connection whose sockets the attempt's deadline cuts off (the new socket
    before the TLS handshake, a kept one when it carries a request), and which keeps its
    socket while an answer is read (http.client drops the connection's reference to a socket
    that closes after the answer), so each read of the answer can be bounded by what is left
    of the deadline."""

    def _new_conn(self):
        sock = super()._new_conn()
        deadlines.watch(sock)
        return sock

    def connect(self):
        super().connect()
        self.answer_socket = self.sock

    def request(self, *args, **kwargs):
        deadlines.watch(self.sock)
        return super().request(*args, **kwargs)


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    """``_Connection`` for https."""

    def _new_conn(self):
        sock = super()._new_conn()
        deadlines.watch(sock)
        return sock

    def connect(self):
        super().connect()
        self.answer_socket = self.sock

    def request(self, *args, **kwargs):
        deadlines.watch(self.sock)
        return super().request(*args, **kwargs)


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Connection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


#: Requests sent to one endpoint at once (outbox.delivering sends that many posts' deliveries
#: side by side).
CONNECTIONS_PER_ENDPOINT = 4
#: Connections kept open to one address: several endpoints often share a host (lanes send
#: to them side by side), so a pool keeps more than one endpoint's worth.
CONNECTIONS_KEPT = 32

_pools: OrderedDict[tuple, urllib3.HTTPConnectionPool] = OrderedDict()
_pools_lock = threading.Lock()


def _pool(scheme: str, ip: str, port: int, host: str) -> urllib3.HTTPConnectionPool:
    """Return the pool of connections to ``ip``:``port`` for ``host``, made on first use."""
    key = (scheme, ip, port, host)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is not None:
            _pools.move_to_end(key)
            return pool
        if scheme == "https":
            pool = _HTTPSPool(
                ip,
                port,
                maxsize=CONNECTIONS_KEPT,
                server_hostname=host,
                assert_hostname=host,
                cert_reqs="CERT_REQUIRED",
            )
        else:
            pool = _HTTPPool(ip, port, maxsize=CONNECTIONS_KEPT)
        _pools[key] = pool
        while len(_pools) > MAX_POOLS:
            _key, old = _pools.popitem(last=False)
            old.close()
        return pool


def clear_pools() -> None:
    """Close every kept pool (at shutdown, and in tests that need fresh connections)."""
    with _pools_lock:
        while _pools:
            _key, pool = _pools.popitem()
            pool.close()


def send(
    url: str,
    body: bytes,
    headers: dict,
    *,
    allow_private: bool,
    allow_http: bool,
    timeout: Timeouts = DEFAULT_TIMEOUTS,
    getaddrinfo=socket.getaddrinfo,
) -> Attempt:
    """POST ``body`` with ``headers`` to ``url`` once and return the ``Attempt``.

    The URL is checked (``check_url``) and its host resolved now; the addresses are tried
    in the resolver's order until one accepts the connection. The resolver's own wait is
    the system's (``getaddrinfo`` has no timeout); everything after it, from connect to the
    answer's last byte, ends by ``timeout.total``. ``allow_http`` is True, False or
    ``"loopback"`` (http:// only to loopback addresses).
    """
    started = time.monotonic()

    def refused(error: str) -> Attempt:
        return Attempt(False, None, "", _one_line(error), time.monotonic() - started, refused=True)

    try:
        target = parse_url(url, allow_http=bool(allow_http), allow_private=allow_private)
    except ValueError as exc:
        return refused(str(exc))
    try:
        ips = resolve(
            target.host, target.port, allow_private=allow_private, getaddrinfo=getaddrinfo
        )
    except BlockedAddress as exc:
        return refused(exc.message)
    except AddressError as exc:
        return Attempt(False, None, "", _one_line(exc.message), time.monotonic() - started)
    if target.scheme == "http" and allow_http == "loopback":
        problem = loopback_only(target.host, ips)
        if problem:
            return refused(problem)
    deadline = time.monotonic() + timeout.total
    with deadlines.deadline(deadline):
        return _post(target, ips, body, headers, timeout, deadline, started)


def _post(target, ips, body, headers, timeout, deadline, started) -> Attempt:
    """POST to the first of ``ips`` that accepts the connection; return the ``Attempt``."""

    def failed(error: str, status: int | None = None, head: str = "") -> Attempt:
        return Attempt(False, status, head, _one_line(error), time.monotonic() - started)

    headers = {**headers, "Host": target.host_header}
    error = ""
    for ip in ips:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return failed(f"timed out after {timeout.total:g} s in all, waiting for {target.host}")
        pool = _pool(target.scheme, ip, target.port, target.host)
        try:
            response = pool.urlopen(
                "POST",
                target.request_target,
                body=body,
                headers=headers,
                retries=False,
                redirect=False,
                preload_content=False,
                decode_content=False,
                assert_same_host=False,
                timeout=urllib3.Timeout(
                    connect=timeout.connect, read=timeout.read, total=remaining
                ),
            )
        except (NewConnectionError, ConnectTimeoutError) as exc:
            # Nothing was sent: the next address may answer.
            error = _connect_error(target.host, ip, exc, timeout)
            logger.info("Webhook to %s: %s", target.host, error)
            continue
        except HTTPError as exc:
            return failed(_request_error(target.host, ip, exc, timeout, deadline))
        return _answer(response, target.host, ip, deadline, timeout, started)
    return failed(error)


def _answer(response, host, ip, deadline, timeout, started) -> Attempt:
    """Read at most ``MAX_READ`` of the answer (each read within the deadline) and make the
    attempt of it."""
    status = response.status
    read = bytearray()
    error = ""
    try:
        while len(read) < MAX_READ:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                error = f"timed out after {timeout.total:g} s in all, waiting for {host} ({ip})"
                break
            _set_read_timeout(response, min(timeout.read, remaining))
            chunk = response.read1(min(_CHUNK, MAX_READ - len(read)))
            if not chunk:
                break
            read += chunk
    except (HTTPError, OSError) as exc:
        # The status arrived; a body cut short still tells people what the endpoint said.
        error = _request_error(host, ip, exc, timeout, deadline)
    finally:
        if len(read) >= MAX_READ or error:
            # Unread data or a broken stream: the connection cannot carry another request.
            response.close()
        response.release_conn()
    head = bytes(read[:HEAD_SIZE]).decode("utf-8", errors="replace")
    ok = 200 <= status < 300 and not error
    if not error and 300 <= status < 400:
        location = response.headers.get("Location")
        where = f" to {location[:200]}" if location else " (no Location given)"
        error = (
            f"the endpoint redirected (HTTP {status}){where}; redirects are not followed,"
            " so set the webhook's URL to the address it redirects to"
        )
    elif not error and not ok:
        error = f"the endpoint answered HTTP {status}"
    retry_after = response.headers.get("Retry-After", "")[:100]
    return Attempt(
        ok, status, head, _one_line(error), time.monotonic() - started, retry_after=retry_after
    )


def _set_read_timeout(response, seconds: float) -> None:
    """Bound the next read of ``response``'s socket, so a slow trickle ends at the deadline."""
    sock = getattr(response.connection, "answer_socket", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))


def _connect_error(host: str, ip: str, exc: Exception, timeout: Timeouts) -> str:
    """Say why the connection to ``ip`` was not made."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, NewConnectionError):
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(exc).lower():
            return f"connection refused by {host} ({ip})"
        if isinstance(cause, socket.timeout | TimeoutError) or "timed out" in str(exc):
            return f"timed out connecting to {host} ({ip}) after {timeout.connect:g} s"
        return f"could not connect to {host} ({ip}): {cause or exc}"
    return f"timed out connecting to {host} ({ip}) after {timeout.connect:g} s"


def _request_error(host: str, ip: str, exc: Exception, timeout: Timeouts, deadline) -> str:
    """Say why a request that reached ``ip`` has no complete answer."""
    if time.monotonic() >= deadline - 0.01:
        # Whatever the socket cut off at the deadline raised, the deadline is why.
        return f"timed out after {timeout.total:g} s in all, waiting for {host} ({ip})"
    if isinstance(exc, SSLError):
        return f"TLS failure with {host} ({ip}): {exc}"
    if _is_timeout(exc):
        return f"timed out waiting for {host} ({ip}) to answer after {timeout.read:g} s"
    if isinstance(exc, ProtocolError):
        return f"{host} ({ip}) closed the connection without a complete response"
    return f"the request to {host} ({ip}) failed: {exc}"


def _is_timeout(exc: Exception) -> bool:
    return isinstance(exc, ReadTimeoutError | socket.timeout | TimeoutError)


def _one_line(text: str) -> str:
    """Return ``text`` on one line, without control characters (it may quote the endpoint)."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
