"""A real loopback HTTP server for webhook tests: records requests, answers as told.

``behaviour`` is read per request: ``("status", 200)``, ``("hang",)`` (wait until the test
ends, so the client's read timeout fires), ``("close",)`` (drop the connection without an
answer), ``("redirect", "https://elsewhere.example/")``.
"""

import http.server
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        server = self.server
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        with server.lock:
            server.received.append(Received("POST", self.path, dict(self.headers), body))
        behaviour = server.behaviour
        if behaviour[0] == "hang":
            server.release.wait(30)
            return
        if behaviour[0] == "close":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if behaviour[0] == "redirect":
            self.send_response(302)
            self.send_header("Location", behaviour[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = f"answer {behaviour[1]}".encode()
        self.send_response(behaviour[1])
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


class Receiver:
    """The running server: its ``url``, what it ``received``, and how it answers."""

    def __init__(self, server):
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}/hook"

    @property
    def received(self) -> list[Received]:
        with self._server.lock:
            return list(self._server.received)

    def answer(self, *behaviour) -> None:
        self._server.behaviour = behaviour

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.received)} of {count} requests arrived")
            time.sleep(0.01)
        return self.received


@contextmanager
def receiver(*behaviour):
    """Run a receiver on 127.0.0.1 (a free port) answering ``behaviour`` (default 200)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.received = []
    server.behaviour = behaviour or ("status", 200)
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield Receiver(server)
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
