"""A hard wall-clock deadline for each webhook attempt, from connect to the last byte.

Per-read timeouts do not bound an attempt: a receiver that sends its status line and headers
one byte every few seconds stays within any of them for as long as it likes. So each attempt
runs inside :func:`deadline`, its connection's sockets are registered with it
(:func:`watch`), and one watchdog thread shuts those sockets down when the deadline passes.
A read or write blocked on a socket that is shut down returns at once, whatever it was
waiting for (the TLS handshake, the status line, the headers, the body).
"""

import heapq
import itertools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


class Deadline:
    """One attempt's deadline (``time.monotonic()``) and the sockets it cuts off."""

    def __init__(self, at: float):
        self.at = at
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def watch(self, sock: socket.socket) -> None:
        """Cut ``sock`` off at the deadline (at once if it has passed)."""
        with self._lock:
            if not self.expired:
                self._sockets.append(sock)
                return
        _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _shut(sock)

    def done(self) -> None:
        """The attempt ended: its sockets are its pool's again, no longer cut off."""
        with self._lock:
            self._sockets = []


def _shut(sock: socket.socket) -> None:
    # shutdown(), not close(): it wakes a thread blocked on the socket, and the descriptor
    # stays its owner's to close (closing it here could close a reused number).
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Watchdog:
    """One thread expiring deadlines in time order, started on first use."""

    def __init__(self):
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, item: Deadline) -> None:
        with self._cond:
            heapq.heappush(self._heap, (item.at, next(self._order), item))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="webhook-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                at, _n, item = self._heap[0]
                wait = at - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
            try:
                item.expire()
            except Exception:
                logger.exception("could not cut off a webhook attempt at its deadline")


_watchdog = _Watchdog()
_current = threading.local()


@contextmanager
def deadline(at: float) -> Iterator[Deadline]:
    """Run an attempt that must end by ``at`` (``time.monotonic()``): sockets watched in it
    are cut off then."""
    item = Deadline(at)
    previous = getattr(_current, "deadline", None)
    _current.deadline = item
    _watchdog.add(item)
    try:
        yield item
    finally:
        item.done()
        _current.deadline = previous


def watch(sock: socket.socket | None) -> None:
    """Cut ``sock`` off at the current attempt's deadline (none outside an attempt)."""
    item = getattr(_current, "deadline", None)
    if item is not None and sock is not None:
        item.watch(sock)
