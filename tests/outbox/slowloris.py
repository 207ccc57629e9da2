"""A slow-loris webhook receiver on loopback: it reads the request, then sends its answer's
status line and headers one byte at a time, ``interval`` apart: ``header_bytes`` of them
before the headers end with an empty 200 answer, unless it is released (or leaves its
context) first, which closes the connection.

This is what a hostile endpoint does to hold a sender: every byte arrives well within any
per-read timeout, so only a deadline on the whole attempt ends it. Its pacing waits on an
event that ``release()`` and leaving the context set, so a test never waits for it to run out.
"""

import socket
import threading

#: How long a connection may wait for its request before the receiver gives up on it.
REQUEST_WAIT = 30.0


class SlowLorisReceiver:
    """A loopback HTTP server that answers every request one header byte per ``interval``."""

    def __init__(self, interval: float = 0.05, *, header_bytes: int = 200, host: str = "127.0.0.1"):
        self.interval = interval
        self.header_bytes = header_bytes
        self.requests = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.05)
        self.host = host
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="slowloris", daemon=True)

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    def url(self, path: str = "/hook") -> str:
        return f"http://{self.host}:{self.port}{path}"

    def release(self) -> None:
        """Stop dripping: every open answer is cut off (the connection closed)."""
        self._released.set()

    def __enter__(self):
        self._accepting.start()
        return self

    def __exit__(self, *exc_info):
        self.release()
        self._accepting.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._released.is_set():
            try:
                conn, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._drip, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            # The request may come long after the connection on a busy machine (the sender's
            # thread waits for the interpreter): waiting for it is not the test's subject.
            conn.settimeout(REQUEST_WAIT)
            try:
                conn.recv(65536)  # the request (small: one read takes it)
            except OSError:
                return
            with self._lock:
                self.requests += 1
            dots = b"." * self.header_bytes
            answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + dots + b"\r\nContent-Length: 0\r\n\r\n"
            for byte in answer:
                if self._released.wait(self.interval):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return  # the sender gave up
