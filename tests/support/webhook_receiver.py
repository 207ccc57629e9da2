"""A webhook endpoint on loopback for tests: a real HTTP server that records what it receives.

``WebhookReceiver`` runs a ``ThreadingHTTPServer`` on 127.0.0.1 (or another address of this
machine; a free port) in a thread while used as a context manager. Each request is recorded
(method, path, headers, body) before it is answered, as the receiver's ``Behaviour`` says
(or a function of the request that returns one, for a receiver that fails some requests):
a status and body, a delay (to make a client time out), closing the connection without an
answer, a redirect, or an answer that never ends. Delays wait on an event that leaving the
context sets, so a test never waits for them to run out.
"""

import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Behaviour:
    """How the receiver answers: ``status`` with ``body`` after ``delay`` seconds, unless it
    ``close``s without answering, redirects to ``redirect_to``, sends an ``endless`` body or
    ``drip``s one byte every ``drip`` seconds, ``drip_count`` times, and then stalls."""

    status: int = 200
    body: bytes = b"ok"
    delay: float = 0.0
    close: bool = False
    redirect_to: str | None = None
    endless: bool = False
    drip: float = 0.0
    drip_count: int = 100
    headers: dict[str, str] = field(default_factory=dict)


class WebhookReceiver:
    """A loopback HTTP server recording requests and answering per ``behaviour``."""

    def __init__(
        self,
        behaviour: Behaviour | Callable[[Received], Behaviour] | None = None,
        *,
        certificate: tuple | None = None,
        host: str = "127.0.0.1",
    ):
        """``certificate``: (certfile, keyfile) to answer https, recording the name each
        client asked for in the TLS handshake (SNI) in ``server_names``."""
        self.behaviour = behaviour or Behaviour()
        self.host = host
        self.server_names: list[str | None] = []
        self._received: list[Received] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        if certificate is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*certificate)
            context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="webhook-receiver",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str = "/hook", *, host: str | None = None, scheme: str = "http") -> str:
        """Return the URL of ``path`` on this receiver (``host`` may be a name)."""
        return f"{scheme}://{host or self.host}:{self.port}{path}"

    @property
    def requests(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        """Return the requests once at least ``count`` have arrived; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            received = self.requests
            if len(received) >= count:
                return received
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the receiver got {len(received)} requests within {timeout}s,"
                    f" not {count}: {received}"
                )
            self._stopping.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, received: Received) -> None:
        with self._lock:
            self._received.append(received)

    def _handler_class(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            # Connections are kept open between requests, and answers are not held back by
            # Nagle's algorithm, as real receivers do.
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self):
                self._handle()

            def do_GET(self):
                self._handle()

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                received = Received(self.command, self.path, dict(self.headers), body)
                receiver._record(received)
                behaviour = receiver.behaviour
                if callable(behaviour):
                    behaviour = behaviour(received)
                if behaviour.delay and receiver._stopping.wait(behaviour.delay):
                    return
                if behaviour.close:
                    self.close_connection = True
                    return
                try:
                    self._answer(behaviour)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (it timed out or stopped reading): nothing to answer.
                    pass

            def _answer(self, behaviour):
                status = behaviour.status
                if behaviour.redirect_to is not None:
                    status = 302 if status < 300 or status >= 400 else status
                self.send_response(status)
                for name, value in behaviour.headers.items():
                    self.send_header(name, value)
                if behaviour.redirect_to is not None:
                    self.send_header("Location", behaviour.redirect_to)
                if behaviour.endless:
                    self.end_headers()
                    chunk = b"x" * 8192
                    while not receiver._stopping.is_set():
                        self.wfile.write(chunk)
                    return
                if behaviour.drip:
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    for _ in range(behaviour.drip_count):
                        if receiver._stopping.wait(behaviour.drip):
                            return
                        self.wfile.write(b".")
                        self.wfile.flush()
                    receiver._stopping.wait()
                    return
                self.send_header("Content-Length", str(len(behaviour.body)))
                self.end_headers()
                self.wfile.write(behaviour.body)

            def log_message(self, format, *args):
                logger.debug("webhook receiver: %s", format % args)

        return Handler
