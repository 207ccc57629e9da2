"""One webhook request: POST the body to the checked address, bounded in time and size.

Built on urllib3. The host is resolved and checked (:mod:`outbox.webhooks.addresses`) at
every attempt and the connection made to that address, with the URL's host in ``Host`` and,
for https, in SNI and the certificate check (the system's CA store). Redirects are never
followed: a 3xx is a failed attempt saying where it pointed. At most ``MAX_READ`` bytes of
the answer are read and the first ``HEAD_BYTES`` kept. Network trouble never raises: it is
an :class:`Attempt` whose ``error`` says what happened, in words for the admin.
"""

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

from outbox.webhooks.addresses import BlockedAddress, check_url, resolve

#: The most of an answer read (the rest is left unread, the connection closed).
MAX_READ = 64 * 1024

#: How much of an answer is kept with the attempt.
HEAD_BYTES = 512


@dataclass(frozen=True)
class Timeouts:
    """Seconds to connect, and to wait for the answer; the attempt's total is their sum."""

    connect: float = 3.0
    read: float = 10.0


@dataclass(frozen=True)
class Attempt:
    """What one request did: ``ok`` for a 2xx answer; ``error`` (one line) otherwise."""

    ok: bool
    status_code: int | None
    response_head: str
    error: str
    duration: float


def send(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    allow_private: bool,
    allow_http: bool,
    timeout: Timeouts = Timeouts(),
) -> Attempt:
    """POST ``body`` to ``url`` and return the :class:`Attempt` (never raises for the network)."""
    started = time.monotonic()

    def failed(error: str, status: int | None = None, head: str = "") -> Attempt:
        return Attempt(False, status, head, error, time.monotonic() - started)

    problem = check_url(url, allow_http=allow_http, allow_private=allow_private)
    if problem:
        return failed(f"refused: {problem}")
    parts = urlsplit(url)
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        address = resolve(host, port, allow_private=allow_private)[0]
    except BlockedAddress as exc:
        return failed(f"refused: {exc}")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    host_header = host if parts.port is None else f"{host}:{parts.port}"
    pool = _pool(parts.scheme, address, port, host, timeout)
    try:
        response = pool.urlopen(
            "POST",
            path,
            body=body,
            headers={**headers, "Host": host_header},
            redirect=False,
            retries=False,
            preload_content=False,
            assert_same_host=False,
        )
    except (ConnectTimeoutError, NewConnectionError) as exc:
        pool.close()
        return failed(_connect_error(exc, timeout))
    except ReadTimeoutError:
        return failed(f"no answer within {timeout.read:g} s (timed out)")
    except SSLError as exc:
        return failed(f"TLS failed: {exc}")
    except ProtocolError as exc:
        return failed(f"the connection closed without an answer ({_reason(exc)})")
    except HTTPError as exc:
        return failed(f"the request failed: {exc}")
    try:
        data = response.read(MAX_READ, decode_content=False) or b""
    except (HTTPError, OSError):
        data = b""
    finally:
        # Whatever is left unread stays unread: the connection is closed, not drained.
        response.close()
        pool.close()
    head = data[:HEAD_BYTES].decode("utf-8", errors="replace")
    status = response.status
    if 200 <= status < 300:
        return Attempt(True, status, head, "", time.monotonic() - started)
    if 300 <= status < 400:
        where = response.headers.get("Location", "nowhere")
        return failed(
            f"the endpoint redirected ({status}) to {where}; redirects are not followed",
            status,
            head,
        )
    return failed(f"the endpoint answered {status}", status, head)


def _pool(scheme: str, address: str, port: int, host: str, timeout: Timeouts):
    """Return a pool connecting to ``address`` (one per request: endpoints are few, and a
    pool keyed by address would outlive a change of DNS)."""
    urllib_timeout = urllib3.Timeout(
        total=timeout.connect + timeout.read, connect=timeout.connect, read=timeout.read
    )
    if scheme == "https":
        return urllib3.HTTPSConnectionPool(
            address,
            port,
            timeout=urllib_timeout,
            maxsize=1,
            server_hostname=host,
            assert_hostname=host,
            cert_reqs="CERT_REQUIRED",
        )
    return urllib3.HTTPConnectionPool(address, port, timeout=urllib_timeout, maxsize=1)


def _connect_error(exc: Exception, timeout: Timeouts) -> str:
    if isinstance(exc, ConnectTimeoutError) and not isinstance(exc, NewConnectionError):
        return f"could not connect within {timeout.connect:g} s (timed out)"
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "timed out" in text:
        return f"could not connect within {timeout.connect:g} s (timed out)"
    return f"could not connect ({_reason(exc)})"


def _reason(exc: Exception) -> str:
    reason = exc.args[-1] if exc.args else exc
    return str(reason).split(":")[-1].strip() or type(exc).__name__
